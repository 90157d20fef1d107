// A validated request turned into what generate() takes: the prompt's token ids (tokenized once, here, so the
// context check and the usage counts see the same ids) and GenerateOptions, with the checkpoint's
// generation_config.json filling the sampling fields the request left unset.
import type { GenerateOptions } from '../generate/generate.js';
import { promptIds } from '../generate/generate.js';
import { defaultStopIds } from '../generate/generation-defaults.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import type { LoadedModel } from '../models/load.js';
import { ContextLengthError, InvalidFieldError } from './errors.js';
import type { CompletionRequest } from './request.js';
import type { ChatMessage } from '../tokenizer/tokenizer.js';
import type { ChatOutputOptions } from './chat-output/chat-output.js';
import { renderChatPrompt } from './chat-prompt.js';
import type { GrammarCompiling } from '../generate/grammar-worker/client.js';

export interface GenerationPlan {
  promptIds: number[];
  maxTokens: number;
  options: GenerateOptions;
  /** Chat: how to read the output (reasoning, tool calls). */
  chatOutput?: ChatOutputOptions;
}

/** The model a server generates with, and the positions a sequence may fill (its cache capacity). */
export interface ServedModel {
  loaded: LoadedModel;
  tokenizer: TextTokenizer;
  contextLength: number;
  /** The grammar engine's worker (response formats are compiled there); absent: compiled in this thread. */
  grammar?: GrammarCompiling;
}

export function planGeneration(req: CompletionRequest, served: ServedModel): GenerationPlan {
  const { loaded, tokenizer, contextLength } = served;
  const prompt = req.kind === 'chat' && !tokenizer.hasChatTemplate ? undefined : req.prompt;
  if (prompt === undefined) throw new InvalidFieldError('messages', "the model's tokenizer has no chat template; use /v1/completions");
  const chat = req.kind === 'chat' ? renderChatPrompt({ ...req, prompt: prompt as ChatMessage[] }, tokenizer) : undefined;
  const ids = chat ? tokenizer.encode(chat.text) : promptIds(tokenizer, prompt);
  const vocab = loaded.config.vocabSize;
  const bad = ids.findIndex((t) => t >= vocab);
  if (bad >= 0) throw new InvalidFieldError('prompt', `token id ${ids[bad]} at index ${bad} is outside the model's vocabulary of ${vocab}`);
  if (ids.length === 0) throw new InvalidFieldError(req.kind === 'chat' ? 'messages' : 'prompt', 'the prompt has no tokens');
  const room = contextLength - ids.length;
  if (req.maxTokens !== undefined ? req.maxTokens > room : room < 1) throw new ContextLengthError(ids.length, req.maxTokens ?? 1, contextLength);
  // Unset: generation_config.json's max_new_tokens, else whatever the context leaves (as OpenAI does).
  const maxTokens = Math.min(req.maxTokens ?? loaded.generationConfig?.maxNewTokens ?? room, room);
  const stopTokenIds =
    req.stopTokenIds.length > 0
      ? [...defaultStopIds(loaded.config.eosTokenIds, loaded.generationConfig, tokenizer.eosTokenIds), ...req.stopTokenIds]
      : undefined;
  const options: GenerateOptions = {
    maxNewTokens: maxTokens,
    generationConfig: loaded.generationConfig,
    temperature: req.temperature,
    topP: req.topP,
    topK: req.topK,
    minP: req.minP,
    presencePenalty: req.presencePenalty,
    frequencyPenalty: req.frequencyPenalty,
    repetitionPenalty: req.repetitionPenalty,
    // generate() derives one draw per step from the seed as a uint32.
    seed: req.seed === undefined ? undefined : req.seed >>> 0,
    stopStrings: req.stop.length > 0 ? req.stop : undefined,
    stopTokenIds,
    logprobs: req.logprobs,
  };
  return { promptIds: ids, maxTokens, options, chatOutput: chat?.output };
}
