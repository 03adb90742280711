#!/usr/bin/env node
// run.js STATEMENTS.json: runs the audit trail's statements on chDB, an
// embedded current ClickHouse (26.x), in a database of its own, in the
// order the dump lists them (audit's TestStatementsOnEveryVersion writes
// it from what the code sent to ClickHouse 18.16, docs/audit.md's
// queries after them). An INSERT the driver sent as native blocks is
// sent with the rows 18.16 holds (TabSeparated); a SELECT with an answer
// from 18.16 must answer the same rows (in any order). Prints one line
// per statement and exits 1 at the first that fails.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Session } = require('chdb');

const sorted = (tsv) => tsv.split('\n').filter((l) => l !== '').sort().join('\n');
const oneLine = (sql) => {
  const s = sql.split(/\s+/).join(' ').trim();
  return s.length > 110 ? `${s.slice(0, 110)}…` : s;
};

function main() {
  const stmts = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'eskv-chdb-'));
  const s = new Session(dir);
  let failed = 0;
  try {
    const version = s.query('SELECT version()', 'TabSeparated').trim();
    s.query('CREATE DATABASE IF NOT EXISTS eskv_audit', 'TabSeparated');
    s.query('USE eskv_audit', 'TabSeparated');
    // First every statement in order, as the code sent them; then every
    // SELECT again on the full trail, against 18.16's answer on it.
    const run = (st, sql) => {
      try {
        return s.query(sql, 'TabSeparated');
      } catch (e) {
        console.log(`chDB ${version}: FAIL ${st.source}  ${oneLine(st.sql)}\n  ${String(e.message || e).split('\n')[0]}`);
        return null;
      }
    };
    for (const st of stmts) {
      let sql = st.sql;
      if (/^\s*INSERT\b/i.test(sql)) {
        // The driver's INSERT INTO t (cols) FORMAT Native, its rows sent apart.
        sql = `${sql.replace(/\s+(VALUES|FORMAT\s+Native)\s*$/i, '')} FORMAT TabSeparated\n${st.rows || ''}`;
      }
      if (run(st, sql) === null) {
        failed++;
        continue;
      }
      console.log(`chDB ${version}: OK  ${st.source}  ${oneLine(st.sql)}`);
    }
    let same = 0;
    for (const st of stmts.filter((x) => x.want !== undefined && x.want !== '')) {
      const got = run(st, `${st.sql}\nFORMAT TabSeparated`);
      if (got === null || sorted(got) !== sorted(st.want)) {
        if (got !== null) console.log(`chDB ${version}: DIFF ${st.source}  ${oneLine(st.sql)}\n  18.16:\n${st.want}\n  chDB:\n${got}`);
        failed++;
        continue;
      }
      same++;
    }
    console.log(`chDB ${version}: ${stmts.length - failed} of ${stmts.length} statements OK; ${same} SELECTs answer the rows 18.16 answers`);
  } finally {
    s.cleanup();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

main();
