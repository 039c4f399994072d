import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/app/config.js';

describe('documentation', () => {
  const configuration = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

  it.each(SETTINGS.map((s) => [s.flag, s.env, s.def] as const))('documents --%s (%s, default %j)', (flag, env, def) => {
    const row = configuration.split('\n').find((l) => l.startsWith(`| \`--${flag}\` |`));
    expect(row, `docs/configuration.md has no row for --${flag}`).toBeDefined();
    expect(row).toContain(`\`${env}\``);
    expect(row).toContain(def === '' ? 'empty' : `\`${def}\``);
  });

  it('opens the README with make run and make test', () => {
    const run = readme.indexOf('make run');
    const test = readme.indexOf('make test');
    expect(run).toBeGreaterThan(-1);
    expect(test).toBeGreaterThan(run);
    expect(run).toBeLessThan(1500);
  });
});
