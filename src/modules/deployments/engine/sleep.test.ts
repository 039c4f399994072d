import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { sleep } from './sleep.js';

// issue 10 item 4: the orchestrator's sleep added an abort listener to the engine's long-lived
// signal at every wait and never removed it (a health wait added about 50 a second, forever).
describe('sleep', () => {
  it('leaves no abort listener behind on a long-lived signal, however many times it waits', async () => {
    const signal = new AbortController().signal;
    for (let i = 0; i < 200; i++) await sleep(0, signal);
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('holds one listener while it waits and none once the wait is cut short by the signal', async () => {
    const controller = new AbortController();
    const waits = [sleep(3_600_000, controller.signal), sleep(3_600_000, controller.signal)];
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(2);
    controller.abort();
    await Promise.all(waits);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('returns at once on a signal that was already aborted, without listening to it', async () => {
    const controller = new AbortController();
    controller.abort();
    await sleep(3_600_000, controller.signal);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
