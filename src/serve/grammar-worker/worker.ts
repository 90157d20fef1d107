// The server's grammar worker thread (spawned by nodeGrammarWorker): the engine side of generate/grammar-worker,
// over this thread's parentPort, with the Node host installed so the engine loads from node_modules.
import { parentPort } from 'node:worker_threads';
import '../../runtime/node-host.js';
import { serveGrammarRequests } from '../../generate/grammar-worker/engine-side.js';

const port = parentPort;
if (!port) throw new Error('serve/grammar-worker/worker.ts runs as a worker thread');
serveGrammarRequests({ onRequest: (handler) => port.on('message', handler), postMessage: (reply, transfer) => port.postMessage(reply, transfer) });
