// How a webhook channel signs its bodies (issue 50), for Settings › Notifications (no React):
// with a secret typed into the form, or with a server secret of the store, by name. The form's
// choice becomes the fields of a channel's create or update, each sent only when it changes.
import type { ChannelCreate, ChannelDto, ChannelUpdate } from '../api/types';

/** Where the signing secret comes from: typed into the form, or stored (by name). */
export type SigningSource = 'typed' | 'stored';

/** What the form holds about signing. */
export type SigningForm = {
  source: SigningSource;
  /** The typed secret: empty keeps the current one. */
  secret: string;
  /** The stored secret's name. */
  secretName: string;
  /** Stop signing: remove the secret, typed or stored. */
  drop: boolean;
};

/** The form's start for `channel` (or a new channel): a channel signing with a stored secret
 * shows its name. */
export function signingForm(channel?: ChannelDto): SigningForm {
  return {
    source: channel?.secret_name ? 'stored' : 'typed',
    secret: '',
    secretName: channel?.secret_name ?? '',
    drop: false,
  };
}

/** The signing fields of a new channel: only a webhook signs. */
export function signingCreate(form: SigningForm, kind: ChannelCreate['kind']): Pick<ChannelCreate, 'secret' | 'secret_name'> {
  if (kind !== 'webhook') return {};
  if (form.source === 'stored') {
    const name = form.secretName.trim();
    return name ? { secret_name: name } : {};
  }
  return form.secret ? { secret: form.secret } : {};
}

/** The signing fields of a change to `channel`, each only when it changes: switching to a
 * stored secret removes the typed one, and a typed secret replaces a stored one. */
export function signingUpdate(form: SigningForm, channel: ChannelDto): Pick<ChannelUpdate, 'secret' | 'secret_name'> {
  const stored = channel.secret_name;
  const typed = channel.has_secret && stored === null;
  if (form.drop) return { ...(typed ? { secret: null } : {}), ...(stored !== null ? { secret_name: null } : {}) };
  if (form.source === 'stored') {
    const name = form.secretName.trim();
    if (name === (stored ?? '')) return {};
    if (!name) return { secret_name: null };
    return { secret_name: name, ...(typed ? { secret: null } : {}) };
  }
  if (!form.secret) return {};
  return { secret: form.secret, ...(stored !== null ? { secret_name: null } : {}) };
}

/** The row's words for how a channel signs: "no", "yes", or "with the stored secret NAME". */
export function signedLabel(channel: ChannelDto): string {
  if (channel.secret_name) return `with the stored secret ${channel.secret_name}`;
  return channel.has_secret ? 'yes' : 'no';
}

/** The names a channel may sign with, of the secrets' suggestions: the server's only. */
export function serverSecretNames(names: { name: string; scopes: string }[]): string[] {
  return names.filter((n) => n.scopes.split(', ').includes('server')).map((n) => n.name);
}
