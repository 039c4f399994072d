import type { Deps } from '../deps.js';

/** Project environment variables (filled in by the env-vars work). */
export class EnvService {
  constructor(readonly deps: Deps) {}
}
