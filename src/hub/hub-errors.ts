import { TensorGpuError } from '../core/errors.js';

/**
 * A model that cannot be had from the Hugging Face Hub or its local cache: a malformed repo id, a gated or missing
 * repo, a failed or corrupted download, a file missing while offline. `repo` names the repo id as given; `status`
 * is the HTTP status when the Hub answered with one.
 */
export class HubError extends TensorGpuError {
  readonly repo: string;
  readonly status?: number;

  constructor(message: string, where: { repo: string; status?: number }) {
    super(message);
    this.repo = where.repo;
    this.status = where.status;
  }
}
