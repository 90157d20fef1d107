// Pieces of a Hugging Face tokenizer.json / tokenizer_config.json that the stand-in tokenizers (LFM2's, Qwen3.5's)
// write alike: an added-token entry, the config's added_tokens_decoder, and a byte-level BPE model block.

/** An added_tokens entry; `normalized` (default false) is true for LFM2's plain added tokens. */
export function addedToken(id: number, content: string, special: boolean, normalized = false): Record<string, unknown> {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized, special };
}

/** tokenizer_config.json's added_tokens_decoder: each added token by its id, less the id. */
export function addedTokensDecoder(added: readonly Record<string, unknown>[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { id, ...entry } of added) out[String(id)] = entry;
  return out;
}

/** The BPE model block; `affixes` '' writes continuing_subword_prefix / end_of_word_suffix as '' (Qwen's), else null. */
export function bpeModel(vocab: Record<string, number>, merges: readonly (readonly [string, string])[], affixes: '' | null): Record<string, unknown> {
  return {
    type: 'BPE',
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: affixes,
    end_of_word_suffix: affixes,
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
    vocab,
    merges,
  };
}
