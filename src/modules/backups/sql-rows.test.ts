import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { SqlRowCounter } from './sql-rows.js';

const DUMP = [
  '-- MariaDB dump 10.19',
  'DROP TABLE IF EXISTS `items`;',
  'CREATE TABLE `items` (`id` int NOT NULL, `v` text) ENGINE=InnoDB;',
  'CREATE TABLE `no_rows` (`x` int);',
  "/*!50001 CREATE VIEW `a_view` AS SELECT 1 AS `one` */;",
  "INSERT INTO `items` VALUES (1,'a (paren) and \\'quote\\' and \\\\'),(2,'x),(y'),(3,NULL);",
  "INSERT INTO `items` VALUES (4,'semi; colon\\nnew line');",
  "INSERT INTO `we``ird` VALUES (1,0x00FF),(2,'(((');",
  'INSERT INTO `lines` VALUES',
  "(1,'one'),",
  "(2,'two;\\\\'),",
  '(3,NULL);',
  "/*!50003 CREATE TRIGGER t BEFORE INSERT ON items FOR EACH ROW SET NEW.v = '(' */;;",
  'INSERT INTO `empty_after` VALUES ();',
  '',
].join('\n');

async function count(chunks: Buffer[]): Promise<Record<string, number>> {
  const counter = new SqlRowCounter();
  const out: Buffer[] = [];
  const sink = new PassThrough();
  sink.on('data', (c: Buffer) => out.push(c));
  await pipeline(Readable.from(chunks), counter, sink);
  expect(Buffer.concat(out).toString('utf8')).toBe(DUMP);
  return Object.fromEntries(counter.rows);
}

describe('the row counter of SQL dumps', () => {
  it('counts one row per tuple, whatever is inside the strings, and passes the dump through unchanged', async () => {
    expect(await count([Buffer.from(DUMP)])).toEqual({ items: 4, no_rows: 0, 'we`ird': 2, lines: 3, empty_after: 1 });
  });

  it('gives the same counts when the dump arrives one byte at a time', async () => {
    const bytes = Buffer.from(DUMP);
    expect(await count([...bytes].map((b) => Buffer.from([b])))).toEqual({ items: 4, no_rows: 0, 'we`ird': 2, lines: 3, empty_after: 1 });
  });
});
