#!/usr/bin/env node
// submit.mjs FILE: submit FILE's puzzles to sudoku-queue as one bulk job,
// over NATS alone (the "submit" endpoint of the workers' micro service),
// read the job's results from JetStream, and print one line per puzzle in
// input order, as `sudoku solve --local` prints them: the solution, or
// "error: line N: REASON" (for several solutions, followed by ": " and
// one of them). See docs/protocol.md for the protocol.
//
// Exit status, as `sudoku solve`'s: 0 when every puzzle has a unique
// solution, 1 when some have not (or are invalid) or the job failed, 2
// for a wrong command line or an input file that cannot be read.
//
// Settings: --server URL (default $NATS_URL, else nats://127.0.0.1:4222),
// --prefix P (default $SUDOKU_QUEUE_SUBJECT_PREFIX, else "sudoku"),
// --owner NAME, the caller that owns the job (default $SUDOKU_OWNER, else
// $NATS_USER, else "anonymous"; with roles on, the NATS user's own name:
// the server lets a user ask only its own subjects), --timeout SECONDS to
// wait for the results (default 300). The job is submitted on
// P.submit.<owner>, and its id starts with "<owner>.". $NATS_USER and
// $NATS_PASSWORD, when set, are the NATS user and password (as for the
// nats CLI).
import { readFile } from "node:fs/promises";
import { connect, DeliverPolicy, StringCodec } from "nats";

const usage = "usage: node submit.mjs [--server URL] [--prefix P] [--owner NAME] [--timeout SECONDS] FILE";

// An owner's name: 1 to 64 letters, digits, '_' or '-' (docs/protocol.md).
const ownerName = /^[A-Za-z0-9_-]{1,64}$/;

function parseArgs(argv) {
  const o = {
    server: process.env.NATS_URL || "nats://127.0.0.1:4222",
    prefix: process.env.SUDOKU_QUEUE_SUBJECT_PREFIX || "sudoku",
    owner: process.env.SUDOKU_OWNER || process.env.NATS_USER || "anonymous",
    timeout: 300,
    file: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value\n${usage}`);
      return argv[++i];
    };
    if (a === "--server") o.server = value();
    else if (a === "--prefix") o.prefix = value();
    else if (a === "--owner") o.owner = value();
    else if (a === "--timeout") o.timeout = Number(value());
    else if (a === "-h" || a === "--help") {
      console.log(usage);
      process.exit(0);
    } else if (a.startsWith("-") && a !== "-") fail(`unknown flag ${a}\n${usage}`);
    else if (o.file === undefined) o.file = a;
    else fail(`one FILE only\n${usage}`);
  }
  if (o.file === undefined) fail(usage);
  if (!(o.timeout > 0)) fail("--timeout wants a number of seconds above 0");
  if (!ownerName.test(o.owner)) fail(`owner ${JSON.stringify(o.owner)}: want 1 to 64 letters, digits, '_' or '-'`);
  return o;
}

function fail(msg) {
  process.stderr.write(`submit.mjs: ${msg}\n`);
  process.exit(2);
}

// text is a result in the text format of `sudoku solve` (Go's
// result.AppendText).
function text(r) {
  if (r.status === "unique" || r.status === "solved") return r.solution;
  let s = "error: ";
  if (r.line > 0) s += `line ${r.line}: `;
  s += r.error || r.status;
  if (r.status === "multiple" && r.solution) s += `: ${r.solution}`;
  return s;
}

// serviceError returns the micro error of a reply, or undefined.
function serviceError(m) {
  const code = m.headers?.get("Nats-Service-Error-Code");
  if (!code) return undefined;
  return { code, description: m.headers.get("Nats-Service-Error") };
}

// readInput returns FILE's bytes ("-": standard input), or fails with a
// one-line message: no stack trace for a missing file.
async function readInput(file) {
  try {
    return await readFile(file === "-" ? 0 : file);
  } catch (err) {
    const why = { ENOENT: "no such file", EACCES: "permission denied", EISDIR: "is a directory" }[err.code] || err.message;
    fail(`input file ${file}: ${why}`);
  }
}

const opts = parseArgs(process.argv.slice(2));
const sc = StringCodec();
const body = await readInput(opts.file);
let nc;
try {
  const auth = process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD } : {};
  nc = await connect({ servers: opts.server.split(","), name: "sudoku-queue node example", ...auth });
} catch (err) {
  process.stderr.write(`submit.mjs: cannot connect to NATS at ${opts.server}: ${err.message}\n`);
  process.exit(1);
}
let status = 0;
let unsolved = 0; // results that are not a unique (or, with first, a found) solution
try {
  if (body.length > nc.info.max_payload) {
    throw new Error(`${opts.file} is ${body.length} bytes, more than the server's max_payload (${nc.info.max_payload}): split it into several jobs`);
  }
  // The file as it is, as text (one puzzle a line, or 9-line grids): the
  // results name the file's lines. (JSON {"puzzles": [...], "first": true}
  // would take options too; its results are in the JSON form by default,
  // as for text.)
  const m = await nc.request(`${opts.prefix}.submit.${opts.owner}`, body, { timeout: 60_000 });
  const se = serviceError(m);
  if (se) throw new Error(`the submit endpoint refused the job (code ${se.code}): ${se.description}`);
  const job = JSON.parse(sc.decode(m.data));
  if (!job.id.startsWith(`${opts.owner}.`)) throw new Error(`job ${job.id} is not ${opts.owner}'s`);
  if (job.results.form !== "json") throw new Error(`the job's results are in the ${job.results.form} form, not json`);
  process.stderr.write(`job ${job.id}: ${job.lines} puzzles (${job.invalid} invalid, ${job.cached} cached, ${job.queued} queued) in ${job.batches} batches\n`);

  // Every results message is one batch; batches cover consecutive lines,
  // so printing them by batch index prints the results in input order.
  // They arrive in the order the workers finish them: hold the early ones.
  // start_seq: no result of the job is before it, so the server need not
  // look through every older job's results.
  const js = nc.jetstream();
  const from = job.results.start_seq
    ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: job.results.start_seq }
    : {};
  const consumer = await js.consumers.get(job.results.stream, { filterSubjects: job.results.filter, ...from });
  const messages = await consumer.consume();
  const held = new Map();
  let next = 0;
  const timer = setTimeout(() => {
    process.stderr.write(`submit.mjs: job ${job.id}: ${next} of ${job.batches} batches in after ${opts.timeout}s; ask its status with: nats req ${opts.prefix}.status.${opts.owner} ${job.id}\n`);
    status = 1;
    messages.stop();
  }, opts.timeout * 1000);
  for await (const msg of messages) {
    const batch = msg.json();
    if (batch.v !== 1 || batch.job !== job.id) throw new Error(`unexpected results message on ${msg.subject}`);
    held.set(batch.batch, batch);
    while (held.has(next)) {
      const results = held.get(next).results;
      unsolved += results.filter((r) => r.status !== "unique" && r.status !== "solved").length;
      const out = results.map(text).join("\n") + "\n";
      held.delete(next);
      next++;
      if (!process.stdout.write(out)) await new Promise((resolve) => process.stdout.once("drain", resolve));
    }
    if (next === job.batches) break;
  }
  clearTimeout(timer);
  messages.stop();
  if (next < job.batches && status === 0) throw new Error(`job ${job.id}: the results ended after ${next} of ${job.batches} batches`);
  if (unsolved > 0) {
    process.stderr.write(`submit.mjs: ${unsolved} of ${job.lines} puzzles without a unique solution\n`);
    status = 1;
  }
} catch (err) {
  process.stderr.write(`submit.mjs: ${err.message}\n`);
  status = 1;
} finally {
  await nc.close();
}
process.exitCode = status;
