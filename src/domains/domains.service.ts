import type { Deps } from '../deps.js';

/** Custom domains of projects (filled in by the domains work). */
export class DomainService {
  constructor(readonly deps: Deps) {}
}
