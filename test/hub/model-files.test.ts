import { describe, expect, it } from 'vitest';
import { metadataFiles, shardsOfIndex, weightFiles, weightIndexFiles } from '../../src/hub/index.js';

const REPO = [
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
  'chat_template.jinja',
  'vocab.json',
  'merges.txt',
  'README.md',
  '.gitattributes',
  'model.safetensors.index.json',
  'model-00001-of-00002.safetensors',
  'model-00002-of-00002.safetensors',
  'pytorch_model.bin',
  'model.pt',
  'model.gguf',
  'onnx/model.onnx',
  'onnx/config.json',
  'original/consolidated.safetensors',
  'flax_model.msgpack',
  'tf_model.h5',
];

describe('which files a model needs', () => {
  it('metadata and index first, then exactly the shards the index names', () => {
    expect(metadataFiles(REPO)).toEqual([
      'config.json',
      'generation_config.json',
      'tokenizer.json',
      'tokenizer_config.json',
      'special_tokens_map.json',
      'chat_template.jinja',
      'vocab.json',
      'merges.txt',
      'model.safetensors.index.json',
    ]);
    const index = { weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors', c: 'model-00001-of-00002.safetensors' } };
    const shards = new Map([['model.safetensors.index.json', shardsOfIndex(index, 'model.safetensors.index.json')]]);
    expect(weightIndexFiles(REPO)).toEqual(['model.safetensors.index.json']);
    expect(weightFiles(REPO, undefined, shards)).toEqual(['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']);
  });

  it('without an index: the canonical single file, else the root *.safetensors; never other formats', () => {
    expect(weightFiles(['model.safetensors', 'model.fp16.safetensors', 'original/x.safetensors'], undefined, new Map())).toEqual(['model.safetensors']);
    expect(weightFiles(['a.safetensors', 'b.safetensors', 'x.bin', 'onnx/c.safetensors'], undefined, new Map())).toEqual(['a.safetensors', 'b.safetensors']);
    expect(weightFiles(['pytorch_model.bin', 'model.gguf'], undefined, new Map())).toEqual([]);
  });

  it('a diffusers subfolder: its own files only', () => {
    const paths = ['model_index.json', 'vae/config.json', 'vae/diffusion_pytorch_model.safetensors', 'vae/diffusion_pytorch_model.bin', 'unet/config.json'];
    expect(metadataFiles(paths, 'vae')).toEqual(['vae/config.json']);
    expect(weightFiles(paths, 'vae', new Map())).toEqual(['vae/diffusion_pytorch_model.safetensors']);
  });

  it('an index that points outside its folder or at another format is refused', () => {
    expect(() => shardsOfIndex({ weight_map: { a: '../secret.safetensors' } }, 'i.json')).toThrow(/tensor 'a'/);
    expect(() => shardsOfIndex({ weight_map: { a: 'pytorch_model.bin' } }, 'i.json')).toThrow(/not a .safetensors/);
    expect(() => shardsOfIndex({}, 'i.json')).toThrow(/no weight_map/);
  });
});
