// The Node host (see host.ts): files through node:fs, paths through node:path, Dawn and the adapter probe's child
// process through webgpu/node.ts. Importing this module installs it; the Node entry (src/index.ts), the CLI
// (cli/main.ts) and the test setup (vitest.config.ts) do. Node-only: the browser entry never imports it.
import { mkdir, open, readFile, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { installNodeHost, type NodeHost } from './host.js';
import { dawnGpu, probeAdapter } from './webgpu/node.js';

const host: NodeHost = {
  async openFile(path) {
    const fh = await open(path, 'r');
    return {
      size: async () => (await fh.stat()).size,
      read: async (into, position) => (await fh.read(into, 0, into.length, position)).bytesRead,
      close: () => fh.close(),
    };
  },
  async createFile(path) {
    const fh = await open(path, 'w');
    return {
      async write(bytes) {
        for (let done = 0; done < bytes.length; ) done += (await fh.write(bytes, done, bytes.length - done)).bytesWritten;
      },
      close: () => fh.close(),
    };
  },
  readText: (path) => readFile(path, 'utf8'),
  writeText: (path, text) => writeFile(path, text),
  async makeDirectory(path) {
    await mkdir(path, { recursive: true });
  },
  async pathKind(path) {
    try {
      const s = await stat(path);
      return s.isFile() ? 'file' : s.isDirectory() ? 'directory' : 'other';
    } catch {
      return undefined;
    }
  },
  joinPath: (...parts) => join(...parts),
  dirname: (path) => dirname(path),
  dawnGpu,
  probeAdapter,
  async importCommonJs(specifier) {
    const require = createRequire(import.meta.url);
    const file = require.resolve(specifier);
    const module = { exports: {} as unknown };
    // The CommonJS wrapper, run once per call (callers cache the result). `process` is hidden so Emscripten glue
    // takes its plain-JS path (its wasm is inline) instead of import('module'), which code built by Function cannot
    // run inside vm-run modules (vitest).
    new Function('exports', 'module', 'require', '__filename', '__dirname', 'process', await readFile(file, 'utf8'))(
      module.exports,
      module,
      require,
      file,
      dirname(file),
      undefined,
    );
    return module.exports;
  },
};

installNodeHost(host);
