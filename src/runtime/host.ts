// What the library needs from its host beyond the web platform: files on disk (checkpoint directories, safetensors
// files), the WebGPU adapter probe's child process and Dawn (the `webgpu` package). Only Node has them. Modules a
// browser bundle reaches call them through this interface and import nothing from Node, not even with import(),
// so bundlers (esbuild, webpack, Vite) need no externals or polyfills. The Node implementation, node-host.ts,
// installs itself when imported: the Node entry (src/index.ts), the CLI and the test setup import it.
import { NodeOnlyError } from '../core/errors.js';
import type { ProbeResult } from './webgpu/diagnose.js';

/** A file opened for positioned reads. */
export interface HostFile {
  size(): Promise<number>;
  /** Reads into `into` from `position`; resolves with the bytes read (0 only at the end of the file). */
  read(into: Uint8Array, position: number): Promise<number>;
  close(): Promise<void>;
}

/** A file opened for writing from its start. */
export interface HostWritableFile {
  /** Appends all of `bytes`. */
  write(bytes: Uint8Array): Promise<void>;
  close(): Promise<void>;
}

export interface AdapterProbeOptions {
  /** The probe child's environment. */
  env: Record<string, string | undefined>;
  timeoutMs: number;
  /** File URL or path of the `webgpu` entry module to probe instead of the resolved package. */
  webgpuModule?: string;
}

export interface NodeHost {
  /** Rejects with the file system's error when the file cannot be opened. */
  openFile(path: string): Promise<HostFile>;
  /** Creates or truncates `path`. */
  createFile(path: string): Promise<HostWritableFile>;
  /** The file as UTF-8; rejects with the file system's error (`code` 'ENOENT' when there is none). */
  readText(path: string): Promise<string>;
  writeText(path: string, text: string): Promise<void>;
  /** Creates `path` and its missing parents. */
  makeDirectory(path: string): Promise<void>;
  /** What is at `path`, following links; undefined when nothing is. */
  pathKind(path: string): Promise<'file' | 'directory' | 'other' | undefined>;
  joinPath(...parts: string[]): string;
  dirname(path: string): string;
  /** Dawn's GPU object, its GPUBufferUsage & co. made globals as in a browser. */
  dawnGpu(): Promise<GPU>;
  /** Runs the adapter probe in a child process, which alone can capture Dawn's native stderr. */
  probeAdapter(options: AdapterProbeOptions): Promise<ProbeResult>;
  /**
   * The exports of a package Node's ESM loader cannot import, evaluated as CommonJS: a UMD file inside a `"type":
   * "module"` package (@mlc-ai/web-xgrammar ships one), which bundlers read as CommonJS but Node as ESM.
   */
  importCommonJs(specifier: string): Promise<unknown>;
}

let installed: NodeHost | undefined;

/** Installs the host (undefined uninstalls it); returns the one it replaces. */
export function installNodeHost(host: NodeHost | undefined): NodeHost | undefined {
  const previous = installed;
  installed = host;
  return previous;
}

/** The installed host, for `fn` (named in the error when there is none: a browser, or Node via the browser entry). */
export function nodeHost(fn: string): NodeHost {
  if (!installed) throw new NodeOnlyError(fn);
  return installed;
}
