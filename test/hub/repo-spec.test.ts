import { describe, expect, it } from 'vitest';
import { HubError, parseRepoSpec } from '../../src/hub/index.js';

const COMMIT = '0123456789abcdef0123456789abcdef01234567';

describe('parseRepoSpec', () => {
  it('reads repo, revision and subfolder', () => {
    expect(parseRepoSpec('Qwen/Qwen3-0.6B')).toEqual({ repo: 'Qwen/Qwen3-0.6B' });
    expect(parseRepoSpec('Qwen/Qwen3-0.6B@main')).toEqual({ repo: 'Qwen/Qwen3-0.6B', revision: 'main' });
    expect(parseRepoSpec(`org/name@${COMMIT}`)).toEqual({ repo: 'org/name', revision: COMMIT });
    expect(parseRepoSpec('org/name/vae')).toEqual({ repo: 'org/name', subfolder: 'vae' });
    expect(parseRepoSpec('org/name/text_encoder/sub/')).toEqual({ repo: 'org/name', subfolder: 'text_encoder/sub' });
    expect(parseRepoSpec('org/name@v1.0/vae')).toEqual({ repo: 'org/name', revision: 'v1.0', subfolder: 'vae' });
    expect(parseRepoSpec('org/name@refs/pr/12/vae')).toEqual({ repo: 'org/name', revision: 'refs/pr/12', subfolder: 'vae' });
  });

  it('leaves local paths and bare words to the caller', () => {
    for (const s of ['/abs/path', './rel/path', '../up/x', '~/models/x', 'C:\\models\\x', 'C:/models/x', 'justaname']) {
      expect(parseRepoSpec(s)).toBeUndefined();
    }
  });

  it('rejects malformed ids with a HubError naming the spec', () => {
    for (const s of [
      'org//name',
      'name/',
      'org/na me',
      'org/name@',
      'org/a--b',
      'org/a..b',
      'org/-name',
      'org/name.git',
      'org/name/../x',
      `org/${'x'.repeat(100)}`,
      'org/name@bad rev',
    ]) {
      let caught: unknown;
      try {
        parseRepoSpec(s);
      } catch (e) {
        caught = e;
      }
      expect(caught, s).toBeInstanceOf(HubError);
      expect((caught as HubError).repo).toBe(s);
      expect((caught as HubError).message).toContain(`'${s}'`);
    }
  });
});
