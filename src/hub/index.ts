// Models by Hugging Face repo id, in the cache huggingface_hub uses.
export { HubError } from './hub-errors.js';
export { parseRepoSpec, isCommitHash, type RepoSpec } from './repo-spec.js';
export { hubCacheDir, hubToken, hubEndpoint, hubOffline, hfHome } from './cache-dir.js';
export { metadataFiles, weightFiles, weightIndexFiles, shardsOfIndex, isNeverFetched } from './model-files.js';
export { resolveModelPath, type HubOptions, type DownloadProgress } from './download.js';
