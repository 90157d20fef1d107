import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hubCacheDir, hubEndpoint, hubOffline, hubToken } from '../../src/hub/index.js';

describe('Hugging Face environment, as huggingface_hub reads it', () => {
  it('cache dir: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub', () => {
    expect(hubCacheDir({ HF_HUB_CACHE: '/c', HF_HOME: '/h' })).toBe('/c');
    expect(hubCacheDir({ HF_HOME: '/h' })).toBe(join('/h', 'hub'));
    expect(hubCacheDir({})).toBe(join(homedir(), '.cache', 'huggingface', 'hub'));
  });

  it('token: HF_TOKEN, else the token file (HF_TOKEN_PATH, else HF_HOME/token)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tensorgpu-token-'));
    try {
      await writeFile(join(dir, 'token'), 'hf_home_token\n');
      await writeFile(join(dir, 'other'), 'hf_path_token');
      expect(hubToken({ HF_TOKEN: 'hf_env', HF_HOME: dir })).toBe('hf_env');
      expect(hubToken({ HF_HOME: dir })).toBe('hf_home_token');
      expect(hubToken({ HF_HOME: dir, HF_TOKEN_PATH: join(dir, 'other') })).toBe('hf_path_token');
      expect(hubToken({ HF_HOME: join(dir, 'nothing-here') })).toBeUndefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('endpoint and offline', () => {
    expect(hubEndpoint({})).toBe('https://huggingface.co');
    expect(hubEndpoint({ HF_ENDPOINT: 'https://hf-mirror.com/' })).toBe('https://hf-mirror.com');
    expect(hubOffline({ HF_HUB_OFFLINE: '1' })).toBe(true);
    expect(hubOffline({ HF_HUB_OFFLINE: 'true' })).toBe(true);
    expect(hubOffline({ HF_HUB_OFFLINE: '0' })).toBe(false);
    expect(hubOffline({})).toBe(false);
  });
});
