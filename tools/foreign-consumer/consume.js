#!/usr/bin/env node
// consume.js: eskv's changelog as a consumer outside Go meets it
// (docs/consumers.md). Reads the changes and conflicts topics from the
// beginning with kafkajs, isolation level read_committed, and checks every
// record: its value against schemas/events/*.json (JSON Schema 2020-12,
// ajv), its CloudEvents headers against the value, its key. Prints one
// JSON summary line and exits 0 when every record passed, 1 otherwise.
//
//   node consume.js -brokers 127.0.0.1:19092 [-changes kv.changes]
//     [-conflicts kv.conflicts] [-schemas ../../schemas/events]
//     [-want-changes N] [-want-conflicts N] [-uncommitted-prefix P]
//     [-timeout-ms 30000] [-idle-ms 2000]
//
// It stops once it has read at least -want-changes and -want-conflicts
// records and nothing new arrived for -idle-ms, or at -timeout-ms. A
// record whose key starts with -uncommitted-prefix was written in a
// transaction that was aborted or is still open: it counts as
// uncommitted, which must stay 0.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { Kafka, logLevel } = require('kafkajs');
const Ajv2020 = require('ajv/dist/2020');
const addFormats = require('ajv-formats');

function args(argv) {
  const o = {
    brokers: '127.0.0.1:19092', changes: 'kv.changes', conflicts: 'kv.conflicts',
    schemas: path.join(__dirname, '..', '..', 'schemas', 'events'),
    'want-changes': '0', 'want-conflicts': '0', 'uncommitted-prefix': '',
    'timeout-ms': '30000', 'idle-ms': '2000',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i].replace(/^-+/, '');
    if (!(name in o) || i + 1 >= argv.length) throw new Error(`unknown flag or missing value: ${argv[i]}`);
    o[name] = argv[i + 1];
  }
  return o;
}

// The CloudEvents id of a change: UUIDv5 of key, NUL, version in the
// namespace of change.v1.json.
const namespace = Buffer.from('6f1c4d524b0e4c1a9d7e0c3e8a5b2f11', 'hex');
function eventID(key, version) {
  const h = crypto.createHash('sha1').update(namespace).update(key).update('\0').update(String(version)).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

function headers(m) {
  const out = {};
  for (const [k, v] of Object.entries(m.headers || {})) out[k] = Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
  return out;
}

// problems returns what is wrong with a record of topic kind ('change' or
// 'conflict') beyond its schema: CloudEvents headers and record key.
function problems(kind, key, value, h, schemaID) {
  const p = [];
  const want = {
    ce_specversion: '1.0', ce_subject: value.key, ce_dataschema: schemaID, 'content-type': 'application/json',
    ce_type: kind === 'change' ? `io.eskv.kv.${value.kind}` : 'io.eskv.kv.conflict',
    ce_id: kind === 'change' ? eventID(value.key, value.version) : value.id,
  };
  for (const [k, v] of Object.entries(want)) if (h[k] !== v) p.push(`header ${k}=${JSON.stringify(h[k])}, want ${JSON.stringify(v)}`);
  if (!h.ce_source) p.push('header ce_source missing');
  if (!h.ce_time || Number.isNaN(Date.parse(h.ce_time))) p.push(`header ce_time=${JSON.stringify(h.ce_time)} is no RFC 3339 time`);
  // A change's record key is its KV key, or key NUL element for an
  // element change; a conflict's is the KV key.
  const wantKey = kind === 'change' && value.element ? `${value.key}\0${value.element.member}` : value.key;
  if (key !== wantKey) p.push(`record key ${JSON.stringify(key)}, want ${JSON.stringify(wantKey)}`);
  if (kind === 'change' && !(value.version > value.prevVersion)) p.push(`version ${value.version} not above prevVersion ${value.prevVersion}`);
  return p;
}

async function main() {
  const o = args(process.argv.slice(2));
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  addFormats(ajv);
  const load = (f) => JSON.parse(fs.readFileSync(path.join(o.schemas, f), 'utf8'));
  const change = load('change.v1.json');
  const conflict = load('conflict.v1.json');
  const kinds = {
    [o.changes]: { kind: 'change', validate: ajv.compile(change), id: change.$id },
    [o.conflicts]: { kind: 'conflict', validate: ajv.compile(conflict), id: conflict.$id },
  };
  const summary = { client: `kafkajs ${require('kafkajs/package.json').version}`, isolation: 'read_committed', topics: {}, invalid: 0, uncommitted: 0, errors: [] };
  for (const t of [o.changes, o.conflicts]) summary.topics[t] = { records: 0, schemaValid: 0, invalid: 0, uncommitted: 0 };

  const kafka = new Kafka({ clientId: 'eskv-foreign-consumer', brokers: o.brokers.split(','), logLevel: logLevel.WARN });
  // readUncommitted false is isolation level read_committed (kafkajs's
  // default, spelled out); a fresh group id so that it reads from the
  // beginning every run.
  const consumer = kafka.consumer({ groupId: `eskv-foreign-${process.pid}-${Date.now()}`, readUncommitted: false, maxWaitTimeInMs: 200 });
  let last = Date.now();
  const want = { [o.changes]: Number(o['want-changes']), [o.conflicts]: Number(o['want-conflicts']) };
  await consumer.connect();
  await consumer.subscribe({ topics: [o.changes, o.conflicts], fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      const k = kinds[batch.topic];
      const s = summary.topics[batch.topic];
      for (const m of batch.messages) {
        last = Date.now();
        s.records++;
        const key = m.key ? m.key.toString('utf8') : '';
        if (o['uncommitted-prefix'] && key.startsWith(o['uncommitted-prefix'])) {
          s.uncommitted++;
          continue;
        }
        let value;
        try {
          value = JSON.parse(m.value.toString('utf8'));
        } catch (e) {
          s.invalid++;
          summary.errors.push(`${batch.topic}/${batch.partition}@${m.offset}: value is no JSON: ${e.message}`);
          continue;
        }
        const ok = k.validate(value);
        const p = ok ? problems(k.kind, key, value, headers(m), k.id) : ajv.errorsText(k.validate.errors).split(', ');
        if (p.length === 0) {
          s.schemaValid++;
        } else {
          s.invalid++;
          if (summary.errors.length < 20) summary.errors.push(`${batch.topic}/${batch.partition}@${m.offset} ${key}: ${p.join('; ')}`);
        }
      }
    },
  });
  const deadline = Date.now() + Number(o['timeout-ms']);
  await new Promise((resolve) => {
    const tick = setInterval(() => {
      const enough = Object.entries(want).every(([t, n]) => summary.topics[t].records >= n);
      if ((enough && Date.now() - last >= Number(o['idle-ms'])) || Date.now() >= deadline) {
        clearInterval(tick);
        resolve();
      }
    }, 100);
  });
  await consumer.disconnect();
  for (const [t, n] of Object.entries(want)) {
    if (summary.topics[t].records < n) summary.errors.push(`${t}: read ${summary.topics[t].records} records, want at least ${n}`);
  }
  for (const s of Object.values(summary.topics)) {
    summary.invalid += s.invalid;
    summary.uncommitted += s.uncommitted;
  }
  process.stdout.write(JSON.stringify(summary) + '\n');
  process.exit(summary.invalid === 0 && summary.uncommitted === 0 && summary.errors.length === 0 ? 0 : 1);
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ errors: [String(e && e.stack || e)] }) + '\n');
  process.exit(2);
});
