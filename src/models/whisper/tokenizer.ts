// Whisper's special tokens, found by name in the checkpoint's tokenizer.json (as openai/whisper's Tokenizer and
// transformers' WhisperTokenizer name them), never by hard-coded id: the ids differ between the English-only,
// multilingual and large-v3 vocabularies, and the built-in preset's small vocabulary has them in the same structure
// (<|endoftext|> right after the text tokens, then <|startoftranscript|>, the languages, the tasks, <|startoflm|>,
// <|startofprev|>, <|nocaptions|> or <|nospeech|>, <|notimestamps|>, and 1501 timestamps <|0.00|> ... <|30.00|>).
import { CheckpointError } from '../../core/errors.js';
import type { TextTokenizer } from '../../tokenizer/text-tokenizer.js';

/** openai/whisper's LANGUAGES, in token order (large-v3 adds 'yue' as the 100th). */
export const WHISPER_LANGUAGES: Readonly<Record<string, string>> = {
  en: 'english',
  zh: 'chinese',
  de: 'german',
  es: 'spanish',
  ru: 'russian',
  ko: 'korean',
  fr: 'french',
  ja: 'japanese',
  pt: 'portuguese',
  tr: 'turkish',
  pl: 'polish',
  ca: 'catalan',
  nl: 'dutch',
  ar: 'arabic',
  sv: 'swedish',
  it: 'italian',
  id: 'indonesian',
  hi: 'hindi',
  fi: 'finnish',
  vi: 'vietnamese',
  he: 'hebrew',
  uk: 'ukrainian',
  el: 'greek',
  ms: 'malay',
  cs: 'czech',
  ro: 'romanian',
  da: 'danish',
  hu: 'hungarian',
  ta: 'tamil',
  no: 'norwegian',
  th: 'thai',
  ur: 'urdu',
  hr: 'croatian',
  bg: 'bulgarian',
  lt: 'lithuanian',
  la: 'latin',
  mi: 'maori',
  ml: 'malayalam',
  cy: 'welsh',
  sk: 'slovak',
  te: 'telugu',
  fa: 'persian',
  lv: 'latvian',
  bn: 'bengali',
  sr: 'serbian',
  az: 'azerbaijani',
  sl: 'slovenian',
  kn: 'kannada',
  et: 'estonian',
  mk: 'macedonian',
  br: 'breton',
  eu: 'basque',
  is: 'icelandic',
  hy: 'armenian',
  ne: 'nepali',
  mn: 'mongolian',
  bs: 'bosnian',
  kk: 'kazakh',
  sq: 'albanian',
  sw: 'swahili',
  gl: 'galician',
  mr: 'marathi',
  pa: 'punjabi',
  si: 'sinhala',
  km: 'khmer',
  sn: 'shona',
  yo: 'yoruba',
  so: 'somali',
  af: 'afrikaans',
  oc: 'occitan',
  ka: 'georgian',
  be: 'belarusian',
  tg: 'tajik',
  sd: 'sindhi',
  gu: 'gujarati',
  am: 'amharic',
  yi: 'yiddish',
  lo: 'lao',
  uz: 'uzbek',
  fo: 'faroese',
  ht: 'haitian creole',
  ps: 'pashto',
  tk: 'turkmen',
  nn: 'nynorsk',
  mt: 'maltese',
  sa: 'sanskrit',
  lb: 'luxembourgish',
  my: 'myanmar',
  bo: 'tibetan',
  tl: 'tagalog',
  mg: 'malagasy',
  as: 'assamese',
  tt: 'tatar',
  haw: 'hawaiian',
  ln: 'lingala',
  ha: 'hausa',
  ba: 'bashkir',
  jw: 'javanese',
  su: 'sundanese',
  yue: 'cantonese',
};

/** The number of timestamp tokens: <|0.00|> ... <|30.00|> in steps of 0.02 s. */
export const WHISPER_TIMESTAMPS = 1501;

export type WhisperTask = 'transcribe' | 'translate';

/** Language name (any case) or code -> code, or undefined. openai/whisper's TO_LANGUAGE_CODE without its aliases. */
export function languageCode(name: string): string | undefined {
  const lower = name.toLowerCase();
  if (lower in WHISPER_LANGUAGES) return lower;
  return Object.keys(WHISPER_LANGUAGES).find((code) => WHISPER_LANGUAGES[code] === lower);
}

/** The special-token ids of a Whisper tokenizer, and text <-> ids. */
export class WhisperTokenizer {
  readonly eot: number;
  readonly sot: number;
  readonly translate: number;
  readonly transcribe: number;
  readonly sotLm: number;
  readonly sotPrev: number;
  /** <|nospeech|> (large-v3) or <|nocaptions|> (earlier); undefined when absent. */
  readonly noSpeech: number | undefined;
  readonly noTimestamps: number;
  /** <|0.00|>: every id from here on is a timestamp. */
  readonly timestampBegin: number;
  /** Language tokens by code, in token order. */
  readonly languageTokens: ReadonlyMap<string, number>;
  /** Whether the vocabulary has language tokens (the English-only models have them too, but never use them). */
  readonly multilingual: boolean;
  private readonly blankIds: number[];

  /**
   * `multilingual`: whether the model was trained with language and task tokens (openai/whisper: n_vocab >= 51865;
   * transformers: generation_config.json's is_multilingual). The English-only vocabularies list language tokens too.
   */
  constructor(
    readonly text: TextTokenizer,
    multilingual: boolean,
  ) {
    const tokens = text.vocabulary().tokens;
    const ids = new Map<string, number>();
    tokens.forEach((t, id) => {
      if (t.startsWith('<|') && t.endsWith('|>')) ids.set(t, id);
    });
    const need = (name: string): number => {
      const id = ids.get(name);
      if (id === undefined) throw new CheckpointError(`the tokenizer has no ${name} token: not a Whisper tokenizer`);
      return id;
    };
    this.eot = need('<|endoftext|>');
    this.sot = need('<|startoftranscript|>');
    this.translate = need('<|translate|>');
    this.transcribe = need('<|transcribe|>');
    this.sotLm = need('<|startoflm|>');
    this.sotPrev = need('<|startofprev|>');
    this.noSpeech = ids.get('<|nospeech|>') ?? ids.get('<|nocaptions|>');
    this.noTimestamps = need('<|notimestamps|>');
    this.timestampBegin = need('<|0.00|>');
    const languages = new Map<string, number>();
    for (const code of Object.keys(WHISPER_LANGUAGES)) {
      const id = ids.get(`<|${code}|>`);
      if (id !== undefined) languages.set(code, id);
    }
    this.languageTokens = languages;
    this.multilingual = multilingual && languages.size > 0;
    this.blankIds = [...this.encode(' '), this.eot];
  }

  /** openai's sot_sequence: <|startoftranscript|>, the language (multilingual only), the task. */
  sotSequence(language: string | undefined, task: WhisperTask): number[] {
    const out = [this.sot];
    if (this.multilingual && language !== undefined) {
      const id = this.languageTokens.get(language);
      if (id === undefined) throw new RangeError(`unknown language '${language}' (the tokenizer has ${[...this.languageTokens.keys()].join(', ')})`);
      out.push(id);
    }
    if (this.multilingual) out.push(task === 'transcribe' ? this.transcribe : this.translate);
    return out;
  }

  encode(text: string): number[] {
    return this.text.encode(text);
  }

  /** Text of the ids below <|endoftext|> (timestamps and special tokens dropped). */
  decodeText(ids: readonly number[]): string {
    const text = ids.filter((t) => t < this.eot);
    return text.length === 0 ? '' : this.text.decode(text, true, { cleanUpSpaces: false });
  }

  /** ' ' and <|endoftext|>: SuppressBlank's tokens. */
  get blankTokens(): readonly number[] {
    return this.blankIds;
  }

  /**
   * openai/whisper's non_speech_tokens: symbols that mark speaker tags or non-speech annotations, each as one token
   * (with and without a leading space), the first token of the musical symbols, and ' -' / " '" mid-word.
   */
  nonSpeechTokens(): number[] {
    const symbols = [...'"#()*+/:;<=>@[\\]^_`{|}~「」『』', ...'<< >> <<< >>> -- --- -( -[ (\' (" (( )) ((( ))) [[ ]] {{ }} ♪♪ ♪♪♪'.split(' ')];
    const miscellaneous = [...'♩♪♫♬♭♮♯'];
    const result = new Set<number>();
    for (const s of [' -', " '"]) {
      const ids = this.encode(s);
      if (ids.length > 0) result.add(ids[0]);
    }
    for (const symbol of [...symbols, ...miscellaneous]) {
      for (const ids of [this.encode(symbol), this.encode(` ${symbol}`)]) {
        if (ids.length === 1 || (miscellaneous.includes(symbol) && ids.length > 0)) result.add(ids[0]);
      }
    }
    return [...result].sort((a, b) => a - b);
  }
}
