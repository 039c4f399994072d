import { Transform, type TransformCallback } from 'node:stream';

const PREFIX = Buffer.from('INSERT INTO `', 'latin1');
/** a table the dump creates is listed even with no rows */
const CREATE = Buffer.from('CREATE TABLE `', 'latin1');
const BACKTICK = 0x60;
const QUOTE = 0x27;
const BACKSLASH = 0x5c;
const OPEN = 0x28;
const CLOSE = 0x29;
const NEWLINE = 0x0a;
const SEMICOLON = 0x3b;
/** a table name longer than MySQL's 64 characters (in UTF-8, doubled backticks) is no table name */
const MAX_NAME = 512;

type State = 'prefix' | 'skip' | 'name' | 'nameTick' | 'values' | 'string' | 'escape';

/**
 * Counts the rows a mysqldump / mariadb-dump stream inserts, per table, as it passes (the
 * manifest's counts come from the dump itself, so they are those of its snapshot): each line
 * that starts with ``INSERT INTO `name` VALUES`` holds one parenthesised tuple per row, with
 * strings in single quotes and backslash escapes (the dump's own form); a line that starts with
 * ``CREATE TABLE `name` `` lists the table with no rows yet. Other lines are skipped.
 * (MariaDB's mariadb-dump writes `VALUES` and then each tuple on a line of its own; MySQL's
 * mysqldump all of them on one line.) One pass over the bytes, state kept across chunks; the data goes through unchanged.
 */
export class SqlRowCounter extends Transform {
  readonly rows = new Map<string, number>();
  private state: State = 'prefix';
  private matched = 0;
  private matchedCreate = 0;
  private creating = false;
  private name: number[] = [];
  private table = '';
  private depth = 0;

  override _transform(chunk: Buffer, _e: BufferEncoding, done: TransformCallback): void {
    this.scan(chunk);
    done(null, chunk);
  }

  private scan(b: Buffer): void {
    for (let i = 0; i < b.length; i++) {
      const c = b[i] as number;
      switch (this.state) {
        case 'prefix':
          // a line that starts with either prefix (-1: this one can no longer match)
          this.matched = this.matched >= 0 && c === PREFIX[this.matched] ? this.matched + 1 : -1;
          this.matchedCreate = this.matchedCreate >= 0 && c === CREATE[this.matchedCreate] ? this.matchedCreate + 1 : -1;
          if (this.matched === PREFIX.length || this.matchedCreate === CREATE.length) {
            this.creating = this.matchedCreate === CREATE.length;
            this.state = 'name';
            this.name = [];
          } else if (this.matched < 0 && this.matchedCreate < 0) {
            this.state = c === NEWLINE ? 'prefix' : 'skip';
            this.matched = 0;
            this.matchedCreate = 0;
          }
          break;
        case 'skip': {
          const nl = b.indexOf(NEWLINE, i);
          if (nl === -1) return;
          i = nl;
          this.state = 'prefix';
          this.matched = 0;
          this.matchedCreate = 0;
          break;
        }
        case 'name':
          if (c === BACKTICK) this.state = 'nameTick';
          else if (this.name.length < MAX_NAME) this.name.push(c);
          else this.state = 'skip';
          break;
        case 'nameTick':
          if (c === BACKTICK) {
            // a doubled backtick is one inside the name
            this.name.push(c);
            this.state = 'name';
          } else if (this.creating) {
            const table = Buffer.from(this.name).toString('utf8');
            this.rows.set(table, this.rows.get(table) ?? 0);
            this.state = 'skip';
            this.matched = 0;
            this.matchedCreate = 0;
            i--;
          } else {
            this.table = Buffer.from(this.name).toString('utf8');
            this.depth = 0;
            this.state = 'values';
            i--;
          }
          break;
        case 'values':
          if (c === QUOTE) this.state = 'string';
          else if (c === OPEN) {
            if (this.depth++ === 0) this.rows.set(this.table, (this.rows.get(this.table) ?? 0) + 1);
          } else if (c === CLOSE) this.depth = Math.max(0, this.depth - 1);
          // the statement ends at its semicolon: MariaDB's dump puts each tuple on a line of its own
          else if (c === SEMICOLON && this.depth === 0) {
            this.state = 'skip';
            this.matched = 0;
            this.matchedCreate = 0;
          }
          break;
        case 'string':
          if (c === BACKSLASH) this.state = 'escape';
          else if (c === QUOTE) this.state = 'values';
          break;
        case 'escape':
          this.state = 'string';
          break;
      }
    }
  }
}
