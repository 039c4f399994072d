// A local stand-in for the one Paystack endpoint Slipway calls, with Paystack's documented shapes:
// - POST /transaction/initialize, JSON, `Authorization: Bearer <secret key>`: answers
//   `{status: true, message: "Authorization URL created", data: {authorization_url, access_code,
//   reference}}`; a wrong key gets 401 `{status: false, message: "Invalid key"}`, a bad or
//   repeated field 400 `{status: false, message}`.
// It also writes signed webhook deliveries (`x-paystack-signature`: hex HMAC-SHA512 of the body
// keyed with the secret key) for the transactions it initialized.
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import { systemClock, type Clock } from '../../src/domain/clock.js';
import type { WebhookDelivery } from './fake-stripe.js';
import { closeServer, listen } from './git-server.js';

export type { WebhookDelivery } from './fake-stripe.js';

export interface PaystackCall {
  method: string;
  path: string;
  status: number;
  /** the Authorization header as received */
  authorization: string | undefined;
  contentType: string | undefined;
  /** the JSON body; undefined when it was not JSON */
  body: Record<string, unknown> | undefined;
}

export interface FakeTransaction {
  /** Paystack's numeric transaction id */
  id: number;
  reference: string;
  access_code: string;
  /** subunits */
  amount: number;
  currency: string;
  email: string;
  callback_url: string | null;
  /** the metadata as sent, parsed when it was a JSON string */
  metadata: unknown;
}

export interface PaystackEventOverrides {
  /** data.id; the gateway's event id derives from it, so repeat one to build a replay */
  transactionId?: number;
  amountMinor?: number;
  currency?: string;
  /** data.status; default 'success' */
  status?: string;
  /** sign with this instead of the secret key */
  secret?: string;
}

export interface FakePaystack {
  /** `http://127.0.0.1:<port>`: the gateway's apiUrl */
  url: string;
  secretKey: string;
  /** every request, in order */
  calls: PaystackCall[];
  /** by reference */
  transactions: Map<string, FakeTransaction>;
  /** a signed delivery of any `event` about a transaction this fake initialized */
  event(event: string, reference: string, overrides?: PaystackEventOverrides): WebhookDelivery;
  /** `charge.success` for the transaction */
  completedEvent(reference: string, overrides?: PaystackEventOverrides): WebhookDelivery;
  close(): Promise<void>;
}

export interface FakePaystackOptions {
  secretKey?: string;
  /** the integration's currency, used when a request names none; default NGN */
  defaultCurrency?: string;
  clock?: Clock;
}

export async function startFakePaystack(opts: FakePaystackOptions = {}): Promise<FakePaystack> {
  const secretKey = opts.secretKey ?? `sk_test_${randomBytes(20).toString('hex')}`;
  const clock = opts.clock ?? systemClock;
  const calls: PaystackCall[] = [];
  const transactions = new Map<string, FakeTransaction>();
  let nextId = 4_100_000_001;
  let url = '';

  const server = createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const body = parseObject(await readBody(req));
      const call: PaystackCall = { method: req.method ?? '', path, status: 0, authorization: req.headers.authorization, contentType: req.headers['content-type'], body };
      calls.push(call);
      const send = (status: number, payload: unknown) => {
        call.status = status;
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(payload));
      };
      const refuse = (status: number, message: string) => {
        send(status, { status: false, message });
      };

      if (req.headers.authorization !== `Bearer ${secretKey}`) {
        refuse(401, 'Invalid key');
        return;
      }
      if (req.method !== 'POST' || path !== '/transaction/initialize') {
        refuse(404, 'The requested route was not found');
        return;
      }
      if (body === undefined) {
        refuse(400, 'Invalid JSON body');
        return;
      }
      const email = body['email'];
      if (typeof email !== 'string' || !email.includes('@')) {
        refuse(400, 'Invalid Email Address Passed');
        return;
      }
      const amount = body['amount'];
      if (!((typeof amount === 'string' && /^[0-9]+$/.test(amount)) || (typeof amount === 'number' && Number.isInteger(amount))) || Number(amount) <= 0) {
        refuse(400, 'Invalid Amount Sent');
        return;
      }
      const reference = typeof body['reference'] === 'string' ? body['reference'] : randomBytes(6).toString('hex');
      if (!/^[A-Za-z0-9.=-]+$/.test(reference)) {
        refuse(400, 'Invalid transaction reference: only letters, digits and - . = are allowed');
        return;
      }
      if (transactions.has(reference)) {
        refuse(400, 'Duplicate Transaction Reference');
        return;
      }
      const metadata = body['metadata'];
      const accessCode = randomBytes(8).toString('hex');
      transactions.set(reference, {
        id: nextId++,
        reference,
        access_code: accessCode,
        amount: Number(amount),
        currency: typeof body['currency'] === 'string' ? body['currency'] : (opts.defaultCurrency ?? 'NGN'),
        email,
        callback_url: typeof body['callback_url'] === 'string' ? body['callback_url'] : null,
        metadata: typeof metadata === 'string' ? (parseObject(metadata) ?? metadata) : metadata,
      });
      send(200, { status: true, message: 'Authorization URL created', data: { authorization_url: `${url}/checkout/${accessCode}`, access_code: accessCode, reference } });
    })();
  });
  url = await listen(server);

  const event = (name: string, reference: string, o: PaystackEventOverrides = {}): WebhookDelivery => {
    const t = transactions.get(reference);
    if (t === undefined) throw new Error(`the fake Paystack initialized no transaction ${reference}`);
    const now = clock.now().toISOString();
    const body = JSON.stringify({
      event: name,
      data: {
        id: o.transactionId ?? t.id,
        domain: 'test',
        status: o.status ?? 'success',
        reference,
        amount: o.amountMinor ?? t.amount,
        message: null,
        gateway_response: 'Successful',
        paid_at: now,
        created_at: now,
        channel: 'card',
        currency: o.currency ?? t.currency,
        metadata: t.metadata,
        customer: { email: t.email },
      },
    });
    const signature = createHmac('sha512', o.secret ?? secretKey).update(body).digest('hex');
    return { body, headers: { 'content-type': 'application/json', 'x-paystack-signature': signature } };
  };

  return {
    url,
    secretKey,
    calls,
    transactions,
    event,
    completedEvent: (reference, overrides) => event('charge.success', reference, overrides),
    close: () => closeServer(server),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
