import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import { Leadership, type Campaign, type LeadershipLog } from '../../src/modules/deployments/engine/leadership.js';
import { iso, type Clock } from '../../src/domain/clock.js';
import { createStore, type Store } from '../../src/store/db.js';
import { freshDatabase, STORE_KINDS, type TestDatabase } from '../factories/stores.js';

const TTL = 30_000;
const T0 = Date.parse('2026-11-23T10:00:00.000Z');
/** Real milliseconds between a campaign's attempts: short, so that the cases run fast. */
const TICK = 5;

/** One process's clock, moved by the test. */
class TestClock implements Clock {
  ms = T0;
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

const at = (ms: number) => iso(new Date(ms));

/** Polls until `cond` holds; 5 s is a bound for a broken case, not a measure of anything. */
async function eventually(what: string, cond: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await cond()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting until ${what}`);
}

/** Waits until `lease` has made `n` more attempts, so that at least n - 1 ran entirely from now on. */
async function attempts(lease: Leadership, n: number): Promise<void> {
  const spy = vi.spyOn(lease, 'tryAcquire');
  const from = spy.mock.calls.length;
  await eventually(`${n.toString()} more attempts`, () => spy.mock.calls.length >= from + n);
}

describe.each(STORE_KINDS)('leadership on %s', (kind) => {
  let database: TestDatabase;
  // Two connections to one store, as two Slipway processes have.
  let one: Store;
  let two: Store;
  let n = 0;

  beforeAll(async () => {
    database = await freshDatabase(kind);
    one = await createStore(database.url);
    two = await createStore(database.url);
  });
  afterAll(async () => {
    await one.close();
    await two.close();
    await database.drop();
  });

  /** What the callbacks and the logger of each holder saw, in order: `a elected`, `b warn: …`. */
  let events: string[];
  const logTo = (who: string): LeadershipLog => ({
    info: (_obj, msg) => {
      events.push(`${who} info: ${msg}`);
    },
    warn: (_obj, msg) => {
      events.push(`${who} warn: ${msg}`);
    },
    error: (_obj, msg) => {
      events.push(`${who} error: ${msg}`);
    },
  });
  const callbacks = () => events.filter((e) => !e.includes(':'));

  /** A new lease name per case, so the cases share the store but not a lease. */
  function contenders(clockA = new TestClock(), clockB = clockA, storeA = one) {
    events = [];
    const name = `lease-${(n++).toString()}`;
    const a = new Leadership({ leases: storeA.repos.leases, clock: clockA, log: logTo('a'), name, holder: 'a', ttlMs: TTL });
    const b = new Leadership({ leases: two.repos.leases, clock: clockB, log: logTo('b'), name, holder: 'b', ttlMs: TTL });
    const row = () => one.db.selectFrom('leases').selectAll().where('name', '=', name).executeTakeFirst();
    return { name, a, b, row };
  }

  function lead(lease: Leadership, who: string, o: { onElected?: () => Promise<void>; deposing?: Promise<void>; renewEveryMs?: number } = {}): Campaign {
    return lease.lead({
      onElected:
        o.onElected ??
        (() => {
          events.push(`${who} elected`);
          return Promise.resolve();
        }),
      onDeposed: async () => {
        events.push(`${who} deposed`);
        await o.deposing;
      },
      renewEveryMs: o.renewEveryMs ?? TICK,
      retryEveryMs: TICK,
    });
  }

  it('takes a lease over from a holder known to be dead only while that holder still has it', async () => {
    const { a, b } = contenders();
    expect(await a.tryAcquire()).toBe(true);
    expect(await b.tryAcquire()).toBe(false);
    expect(await b.takeOver('someone-else')).toBe(false);
    expect(await b.takeOver('a')).toBe(true);
    expect(await b.holder()).toMatchObject({ holder: 'b' });
    expect(b.heldUntil).not.toBeNull();
    // the old holder cannot renew any more, and a second take-over from it finds nothing
    expect(await a.tryAcquire()).toBe(false);
    expect(await a.takeOver('a')).toBe(false);
  });

  it('gives a free or expired lease to exactly one of several racing holders', async () => {
    const clock = new TestClock();
    const { name } = contenders(clock);
    const racers = [0, 1, 2, 3, 4, 5].map(
      (i) => new Leadership({ leases: (i % 2 === 0 ? one : two).repos.leases, clock, log: logTo(`h${i.toString()}`), name, holder: `h${i.toString()}`, ttlMs: TTL }),
    );
    for (const round of [1, 2]) {
      const won = await Promise.all(racers.map((r) => r.tryAcquire()));
      expect(won.filter(Boolean), `round ${round.toString()}`).toHaveLength(1);
      const winner = `h${won.indexOf(true).toString()}`;
      expect(await racers[0]?.holder()).toEqual({ holder: winner, expiresAt: at(clock.ms + TTL) });
      // The winner renews; the others still cannot take it.
      expect(await Promise.all(racers.map((r) => r.tryAcquire()))).toEqual(won);
      clock.advance(TTL + 1);
    }
  });

  it('keeps the lease with a holder that renews it, and hands it over only once the ttl has passed without renewal', async () => {
    const clock = new TestClock();
    const { a, b, row } = contenders(clock);
    expect(await a.tryAcquire()).toBe(true);
    expect(a.heldUntil).toEqual(new Date(T0 + TTL));
    clock.advance(TTL - 1);
    expect(await b.tryAcquire()).toBe(false);
    expect(b.heldUntil).toBeNull();
    expect(await a.tryAcquire()).toBe(true);
    const renewedUntil = T0 + TTL - 1 + TTL;
    // The last instant of the renewed lease: still a's.
    clock.advance(TTL);
    expect(await b.tryAcquire()).toBe(false);
    expect(await b.holder()).toEqual({ holder: 'a', expiresAt: at(renewedUntil) });
    expect(await row()).toMatchObject({ holder: 'a', acquired_at: at(T0) });

    clock.advance(1);
    expect(await b.holder()).toBeNull();
    expect(await b.tryAcquire()).toBe(true);
    expect(b.heldUntil).toEqual(new Date(clock.ms + TTL));
    expect(await a.tryAcquire()).toBe(false);
    expect(a.heldUntil).toBeNull();
    expect(await a.holder()).toEqual({ holder: 'b', expiresAt: at(clock.ms + TTL) });
    expect(await row()).toMatchObject({ holder: 'b', acquired_at: at(clock.ms) });
  });

  it('lets another take the lease at once when its holder releases it, and only its holder', async () => {
    const { a, b } = contenders();
    expect(await a.tryAcquire()).toBe(true);
    await b.release();
    expect((await a.holder())?.holder).toBe('a');
    expect(await b.tryAcquire()).toBe(false);
    await a.release();
    expect(a.heldUntil).toBeNull();
    expect(await a.holder()).toBeNull();
    expect(await b.tryAcquire()).toBe(true);
  });

  it('elects one campaign once, keeps it while it renews, and elects the other only after the leader has stopped its work', async () => {
    const clock = new TestClock();
    const { a, b } = contenders(clock);
    let finishDeposing: () => void = () => undefined;
    const deposing = new Promise<void>((resolve) => {
      finishDeposing = resolve;
    });
    const campaigns = { a: lead(a, 'a', { deposing }), b: lead(b, 'b', { deposing }) };
    try {
      await eventually('one leads', () => campaigns.a.leading || campaigns.b.leading);
      const [winner, other] = campaigns.a.leading ? (['a', 'b'] as const) : (['b', 'a'] as const);
      const lease = { a, b };
      // Across several ttls, the leader's renewals keep the lease from the other.
      for (let i = 0; i < 4; i++) {
        clock.advance(TTL / 2);
        await eventually('the leader renews', async () => (await a.holder())?.expiresAt === at(clock.ms + TTL));
      }
      expect(callbacks()).toEqual([`${winner} elected`]);
      expect(campaigns[other].leading).toBe(false);

      // Stopping the leader: the other is not elected while the leader's work is still stopping.
      const stopped = campaigns[winner].stop();
      await eventually('the leader is deposed', () => events.includes(`${winner} deposed`));
      await attempts(lease[other], 2);
      expect(campaigns[other].leading).toBe(false);
      expect((await a.holder())?.holder).toBe(winner);
      finishDeposing();
      await stopped;
      // Released: no need to wait for the lease to expire (the clock does not move).
      await eventually('the other leads', () => campaigns[other].leading);
      expect(callbacks()).toEqual([`${winner} elected`, `${winner} deposed`, `${other} elected`]);
    } finally {
      finishDeposing();
      await Promise.all([campaigns.a.stop(), campaigns.b.stop()]);
    }
  });

  it('deposes a leader whose lease ran out and was taken by another process', async () => {
    // a's clock stands still, so its renewals stop extending its lease, as for a stalled process.
    const clockA = new TestClock();
    const clockB = new TestClock();
    const { a, b } = contenders(clockA, clockB);
    const campaign = lead(a, 'a');
    try {
      await eventually('a leads', () => campaign.leading);
      clockB.advance(TTL);
      expect(await b.tryAcquire()).toBe(false);
      clockB.advance(1);
      expect(await b.tryAcquire()).toBe(true);
      await eventually('a is deposed', () => !campaign.leading);
      expect(callbacks()).toEqual(['a elected', 'a deposed']);
      expect(events).toContain('a warn: Deposed: another process took the lease');
      // Standing by, a cannot take b's lease back.
      await attempts(a, 2);
      expect(campaign.leading).toBe(false);
      expect((await b.holder())?.holder).toBe('b');
    } finally {
      await campaign.stop();
    }
    // Stopping a standby calls nothing and leaves the holder's lease alone.
    expect(callbacks()).toEqual(['a elected', 'a deposed']);
    expect((await b.holder())?.holder).toBe('b');
  });

  it('after a crash (no release, no renewal), hands the lease over only once it has expired', async () => {
    const clock = new TestClock();
    // a's own connection: closing it is a's crash, as far as the store can tell.
    const crashing = await createStore(database.url);
    const { a, b } = contenders(clock, clock, crashing);
    const campaignA = lead(a, 'a');
    let campaignB: Campaign | null = null;
    try {
      await eventually('a leads', () => campaignA.leading);
      campaignB = lead(b, 'b');
      await crashing.close();
      await attempts(a, 2);
      await attempts(b, 2);
      // The lease surely runs: a leads on through failed renewals.
      expect(callbacks()).toEqual(['a elected']);
      expect(events).toContain('a warn: Could not take or renew the lease');

      // a steps down before its lease can run out (its next renewal would come too late) …
      clock.advance(TTL - TICK);
      await eventually('a steps down', () => !campaignA.leading);
      expect(events).toContain('a error: Deposed: the lease could not be renewed before it runs out');
      // … and b waits for the lease to expire, to its last instant.
      clock.advance(TICK);
      await attempts(b, 2);
      expect(campaignB.leading).toBe(false);
      clock.advance(1);
      const bLeading = campaignB;
      await eventually('b leads', () => bLeading.leading);
      expect(callbacks()).toEqual(['a elected', 'a deposed', 'b elected']);
    } finally {
      await campaignA.stop();
      await campaignB?.stop();
    }
    expect(events).toContain('a warn: Could not release the lease; it will expire');
  });

  it('releases the lease and stands by when onElected fails', async () => {
    const { a, b } = contenders();
    const campaignA = lead(a, 'a', {
      onElected: () => {
        events.push('a failed to start');
        return Promise.reject(new Error('no engine'));
      },
    });
    let campaignB: Campaign | null = null;
    try {
      await eventually('a tried to lead', () => events.includes('a failed to start'));
      campaignB = lead(b, 'b');
      const bLeading = campaignB;
      // Without any clock movement: a released the lease.
      await eventually('b leads', () => bLeading.leading);
      expect(campaignA.leading).toBe(false);
      expect(events).toContain('a error: Could not take up the work of the lease; releasing it');
    } finally {
      await campaignA.stop();
      await campaignB?.stop();
    }
    // a never led, so it is never deposed.
    expect(callbacks().filter((e) => e.startsWith('a ') && e !== 'a failed to start')).toEqual([]);
  });

  it('renews at once after a slow onElected, without waiting for the renewal period', async () => {
    const clock = new TestClock();
    const { a } = contenders(clock);
    const campaign = lead(a, 'a', {
      onElected: () => {
        clock.advance((TTL * 2) / 3);
        return Promise.resolve();
      },
      // Far longer than the case: only the renewal right after the election can happen.
      renewEveryMs: 600_000,
    });
    try {
      await eventually('a renews', async () => (await a.holder())?.expiresAt === at(T0 + (TTL * 2) / 3 + TTL));
      expect(campaign.leading).toBe(true);
    } finally {
      await campaign.stop();
    }
  });

  it('migrates from scratch and from the previous migration', async () => {
    const names = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(one.db);
    expect(names.rows.map((r) => r.name)).toContain('2026-11-23T000000-leases');

    const old = await freshDatabase(kind);
    try {
      const partial = await createStore(old.url, { upTo: '2026-11-22T000000-deploy-queue' });
      const missing = await partial.db.selectFrom('leases').selectAll().execute().then(() => null, (e: unknown) => e);
      await partial.close();
      expect(missing).toBeInstanceOf(Error);
      const full = await createStore(old.url);
      try {
        const clock = new TestClock();
        const lease = new Leadership({ leases: full.repos.leases, clock, log: logTo('m'), name: 'deploy-engine', holder: 'm', ttlMs: TTL });
        expect(await lease.tryAcquire()).toBe(true);
        expect(await lease.holder()).toEqual({ holder: 'm', expiresAt: at(T0 + TTL) });
      } finally {
        await full.close();
      }
    } finally {
      await old.drop();
    }
  });
});
