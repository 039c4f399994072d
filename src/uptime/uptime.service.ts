import type { Deps } from '../deps.js';

/** Uptime monitor settings of projects (filled in by the uptime work). */
export class UptimeService {
  constructor(readonly deps: Deps) {}
}
