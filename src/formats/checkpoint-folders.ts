// The places a checkpoint folder's files can be: a directory on disk (Node), a folder at a URL (read by Range
// requests, optionally kept in the browser's weight cache), or files the user picked in a page. Checkpoint opens
// any of them the same way: config.json, then the shard index or the single weight file.
import { CheckpointError } from '../core/errors.js';
import { nodeHost } from '../runtime/host.js';
import { blobSource } from './byte-source.js';
import { SafetensorsFile } from './safetensors-reader.js';
import { fetchText, urlExists, type CachedUrlOptions } from './weight-cache.js';

/** The files of a checkpoint folder, wherever it is. */
export interface CheckpointFolder {
  /** The folder, for messages. */
  readonly label: string;
  /** A file's full name, for messages. */
  path(name: string): string;
  exists(name: string): Promise<boolean>;
  /** The file's text, or undefined when it does not exist. */
  readText(name: string): Promise<string | undefined>;
  open(name: string): Promise<SafetensorsFile>;
}

/** A directory on disk (Node only: through the Node host, so browser bundles reach no file system). */
export async function directoryFolder(dir: string): Promise<CheckpointFolder> {
  const host = nodeHost('directoryFolder');
  const inDir = (name: string) => host.joinPath(dir, name);
  return {
    label: dir,
    path: inDir,
    exists: async (name) => (await host.pathKind(inDir(name))) !== undefined,
    readText: async (name) => {
      try {
        return await host.readText(inDir(name));
      } catch (e) {
        if ((e as { code?: string }).code === 'ENOENT') return undefined;
        throw new CheckpointError(`cannot read: ${(e as Error).message}`, { file: inDir(name) });
      }
    },
    open: (name) => SafetensorsFile.open(inDir(name)),
  };
}

/** A folder at a URL: JSON files fetched whole, weight files read by Range requests (or from the weight cache). */
export function urlFolder(url: string, options: CachedUrlOptions): CheckpointFolder {
  const base = url.endsWith('/') ? url : `${url}/`;
  return {
    label: url,
    path: (name) => base + name,
    exists: (name) => urlExists(base + name, options),
    readText: (name) => fetchText(base + name, options),
    open: (name) => SafetensorsFile.fromUrl(base + name, options),
  };
}

/** A file picked in a page (a DOM `File`; Node's `File` too): a Blob with a name. */
export interface PickedFile extends Blob {
  readonly name: string;
  /** The path under the picked folder, folder included ("Qwen3-0.6B/config.json"), for `webkitdirectory` picks. */
  readonly webkitRelativePath?: string;
}

/**
 * Files picked in a page: a folder (`<input type=file webkitdirectory>`), whose top level is the checkpoint (files in
 * its subfolders, e.g. `original/` or `onnx/` copies, are not), or several files picked together.
 */
export function pickedFolder(picked: Iterable<PickedFile>): CheckpointFolder {
  const byName = new Map<string, PickedFile>();
  let folderName: string | undefined;
  for (const file of picked) {
    const parts = (file.webkitRelativePath || file.name).split('/');
    if (parts.length > 2) continue;
    if (parts.length === 2) folderName ??= parts[0];
    const name = parts[parts.length - 1]!;
    if (byName.has(name)) throw new CheckpointError('two picked files have this name', { file: name });
    byName.set(name, file);
  }
  const label = folderName ?? 'the picked files';
  const path = (name: string) => (folderName === undefined ? name : `${folderName}/${name}`);
  const file = (name: string) => {
    const f = byName.get(name);
    if (!f) throw new CheckpointError(`not among the picked files (${[...byName.keys()].join(', ') || 'none'})`, { file: path(name) });
    return f;
  };
  return {
    label,
    path,
    exists: async (name) => byName.has(name),
    readText: async (name) => {
      const f = byName.get(name);
      try {
        return await f?.text();
      } catch (e) {
        throw new CheckpointError(`cannot read: ${(e as Error).message}`, { file: path(name) });
      }
    },
    open: async (name) => SafetensorsFile.fromSource(blobSource(file(name)), path(name)),
  };
}
