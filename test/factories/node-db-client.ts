// A program for a container on a workspace network (see nodeClientImage in images.ts): logs in
// with the official Node client of a database type and exactly the connection string it is
// given, writes a value, reads it back on a new connection and prints `read: <value>`.
//   node node-db-client.cjs <postgresql|mysql|redis> <connection string> <value>
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Redis } from 'ioredis';

async function main(type: string, url: string, value: string): Promise<string> {
  switch (type) {
    case 'postgresql': {
      const w = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
      await w.connect();
      await w.query('create table if not exists from_node (v text)');
      await w.query('insert into from_node (v) values ($1)', [value]);
      await w.end();
      const r = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
      await r.connect();
      const rows = (await r.query<{ v: string }>('select v from from_node where v = $1', [value])).rows;
      await r.end();
      return rows[0]?.v ?? '';
    }
    case 'mysql': {
      const w = await mysql.createConnection({ uri: url, connectTimeout: 10_000 });
      await w.query('create table if not exists from_node (v varchar(200))');
      await w.query('insert into from_node (v) values (?)', [value]);
      await w.end();
      const r = await mysql.createConnection({ uri: url, connectTimeout: 10_000 });
      const [rows] = await r.query('select v from from_node where v = ?', [value]);
      await r.end();
      return (rows as { v: string }[])[0]?.v ?? '';
    }
    case 'redis': {
      const w = new Redis(url, { maxRetriesPerRequest: 1 });
      await w.set('from-node', value);
      w.disconnect();
      const r = new Redis(url, { maxRetriesPerRequest: 1 });
      const got = (await r.get('from-node')) ?? '';
      r.disconnect();
      return got;
    }
    default:
      throw new Error(`unknown type ${type}`);
  }
}

const [type = '', url = '', value = ''] = process.argv.slice(2);
main(type, url, value).then(
  (read) => {
    console.log(`read: ${read}`);
    process.exit(0);
  },
  (err: unknown) => {
    console.error(`failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
