import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

// The same variables and defaults as huggingface_hub (constants.py), so both share one cache and one login.
// They are read from an `env` argument rather than process.env so tests and callers can point elsewhere.
type Env = Readonly<Record<string, string | undefined>>;

const nonEmpty = (v: string | undefined): string | undefined => (v !== undefined && v !== '' ? v : undefined);

/** HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface. */
export function hfHome(env: Env = process.env): string {
  return nonEmpty(env.HF_HOME) ?? join(nonEmpty(env.XDG_CACHE_HOME) ?? join(homedir(), '.cache'), 'huggingface');
}

/** HF_HUB_CACHE (or its old name HUGGINGFACE_HUB_CACHE), else HF_HOME/hub. */
export function hubCacheDir(env: Env = process.env): string {
  return nonEmpty(env.HF_HUB_CACHE) ?? nonEmpty(env.HUGGINGFACE_HUB_CACHE) ?? join(hfHome(env), 'hub');
}

/** HF_TOKEN, else the token file `hf auth login` writes (HF_TOKEN_PATH, else HF_HOME/token); undefined if neither. */
export function hubToken(env: Env = process.env): string | undefined {
  const fromEnv = nonEmpty(env.HF_TOKEN?.trim());
  if (fromEnv) return fromEnv;
  const file = nonEmpty(env.HF_TOKEN_PATH) ?? join(hfHome(env), 'token');
  try {
    return nonEmpty(readFileSync(file, 'utf8').trim());
  } catch {
    return undefined;
  }
}

/** HF_ENDPOINT (a mirror or a local test Hub), else https://huggingface.co; no trailing slash. */
export function hubEndpoint(env: Env = process.env): string {
  return (nonEmpty(env.HF_ENDPOINT) ?? 'https://huggingface.co').replace(/\/+$/, '');
}

/** HF_HUB_OFFLINE set to 1/true/yes/on, as huggingface_hub reads it: use the cache and never the network. */
export function hubOffline(env: Env = process.env): boolean {
  return ['1', 'true', 'yes', 'on'].includes((env.HF_HUB_OFFLINE ?? '').trim().toLowerCase());
}
