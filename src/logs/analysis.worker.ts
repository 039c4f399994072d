// The analysis worker: a thread of its own that runs the built-in analyzer and the model's
// request preparation (src/logs/analysis-pool.ts), so that the event loop never does.
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

// the first analysis compiles the patterns: done here, before the budget of a request starts
analyze('ERROR warm-up: listen EADDRINUSE :::3000\n    at f (/app/a.js:1:1)');
port.postMessage({ ready: true });
