// The grammar worker as a Node worker thread (worker.ts): the compiled worker.js beside this file, or, running from
// the TypeScript sources (tests, tsx), worker.ts loaded through tsx's ESM hooks registered inside the worker (a
// worker's execArgv cannot add them).
import { Worker } from 'node:worker_threads';
import type { GrammarWorkerHandle } from '../../generate/grammar-worker/client.js';
import type { Reply } from '../../generate/grammar-worker/protocol.js';

export function spawnNodeGrammarWorker(): GrammarWorkerHandle {
  let worker: Worker;
  if (import.meta.url.endsWith('.ts')) {
    const entry = new URL('./worker.ts', import.meta.url).href;
    worker = new Worker(`import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); })`, { eval: true });
  } else {
    worker = new Worker(new URL('./worker.js', import.meta.url));
  }
  // A server's open sockets keep the process alive, not its grammar worker.
  worker.unref();
  return {
    postMessage: (request) => worker.postMessage(request),
    listen(onReply, onLost) {
      worker.on('message', (reply: Reply) => onReply(reply));
      worker.on('error', (e) => onLost(`the grammar worker failed: ${e.message}`));
      worker.on('exit', (code) => onLost(`the grammar worker exited (code ${code})`));
    },
    terminate: () => void worker.terminate(),
  };
}
