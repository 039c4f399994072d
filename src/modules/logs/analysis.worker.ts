// The analysis worker: a thread of its own that runs the built-in analyzer and the model's
// request preparation (src/modules/logs/analysis-pool.ts), so that the event loop never does.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { analyze } from './analyzer.js';
import { prepare } from './llm.js';
import type { AnalysisReply, AnalysisTask } from './analysis-pool.js';

const port = parentPort;
if (port === null) throw new Error('analysis.worker runs as a worker thread only');

function run(task: AnalysisTask): AnalysisReply {
  try {
    switch (task.kind) {
      case 'builtin':
        return { ok: true, kind: 'builtin', analysis: analyze(task.logs) };
      case 'prepare':
        return { ok: true, kind: 'prepare', prepared: prepare(task.logs, task.secrets) };
    }
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

port.on('message', (task: AnalysisTask) => {
  port.postMessage(run(task));
});

/**
 * On Linux, this thread alone at a lower priority (nice 10), so that on a busy machine the API's
 * event loop gets the CPU before an analysis does. Linux gives each thread its own nice value,
 * set through its thread id; elsewhere, or when refused, the analysis keeps the process's.
 */
function yieldCpu(): void {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isSafeInteger(tid) && tid > 0 && tid !== process.pid) setPriority(tid, 10);
  } catch {
    // not Linux, or not allowed
  }
}

yieldCpu();
// the first analysis compiles the patterns: done here, before the budget of a request starts
analyze('ERROR warm-up: listen EADDRINUSE :::3000\n    at f (/app/a.js:1:1)');
port.postMessage({ ready: true });
