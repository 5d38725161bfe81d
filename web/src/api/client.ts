// Actions over HTTP (`POST /api/v1/<action>`): they work whatever the state of the WebSocket,
// which is used only for live notifications (./live.ts). `call` is typed by the generated
// `Actions` map: a wrong action name or payload field does not compile.
import type { ActionName, Actions, AttachmentDto, AttachmentUploaded, ErrorPayload } from './types';

export class ApiError extends Error {
  readonly code: ErrorPayload['code'];
  readonly details: unknown;
  constructor(body: ErrorPayload) {
    super(body.message);
    this.code = body.code;
    this.details = body.details;
  }
}

export async function call<A extends ActionName>(
  action: A,
  payload: Actions[A]['request'],
): Promise<Actions[A]['response']> {
  let response: Response;
  try {
    response = await fetch(`/api/v1/${action}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError({
      code: 'NETWORK',
      message: 'the Kandev server cannot be reached; it may be restarting',
    });
  }
  const text = await response.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    throw new ApiError({ code: 'INTERNAL_ERROR', message: `unexpected answer (${response.status})` });
  }
  if (!response.ok) {
    if (response.status === 401) {
      window.location.assign('/login');
    }
    throw new ApiError(body as ErrorPayload);
  }
  return body as Actions[A]['response'];
}

/**
 * Uploads a file (`POST /api/v1/attachment.upload?name=`, the file itself as the body, with
 * the `x-kandev-upload` header the server requires so no other site can upload) and returns
 * the reference `message.add` takes.
 */
export async function uploadAttachment(file: File): Promise<AttachmentDto> {
  let response: Response;
  try {
    response = await fetch(`/api/v1/attachment.upload?name=${encodeURIComponent(file.name || 'pasted')}`, {
      method: 'POST',
      headers: { 'content-type': file.type || 'application/octet-stream', 'x-kandev-upload': '1' },
      body: file,
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError({ code: 'NETWORK', message: 'the Kandev server cannot be reached; it may be restarting' });
  }
  const body: unknown = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError((body as ErrorPayload | null) ?? { code: 'INTERNAL_ERROR', message: `upload failed (${response.status})` });
  }
  return (body as AttachmentUploaded).attachment;
}

/** Where the transcript shows a stored attachment (images inline, anything else downloads). */
export function attachmentUrl(a: AttachmentDto): string {
  return `/api/v1/attachment/${encodeURIComponent(a.id)}?mime=${encodeURIComponent(a.mime)}`;
}

/** A message for a person: what failed and the server's own words. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.code === 'UNKNOWN_ACTION') {
      return `${err.message} (this server does not offer that action yet)`;
    }
    return err.message;
  }
  return err instanceof Error ? err.message : String(err);
}

/** A client-side id for idempotent sends. */
export function clientId(): string {
  if (typeof crypto.randomUUID === 'function') {
    return crypto.randomUUID();
  }
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}
