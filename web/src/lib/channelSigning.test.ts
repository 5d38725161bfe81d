import { describe, expect, it } from 'vitest';
import type { ChannelDto } from '../api/types';
import { serverSecretNames, signedLabel, signingCreate, signingForm, signingUpdate } from './channelSigning';

const channel = (has_secret: boolean, secret_name: string | null): ChannelDto => ({
  id: 'c1',
  kind: 'webhook',
  url_origin: 'https://example.com',
  has_secret,
  secret_name,
  events: ['question_asked'],
  created_at: '2026-01-01T00:00:00Z',
});
const unsigned = channel(false, null);
const typed = channel(true, null);
const stored = channel(true, 'HOOK_KEY');

describe('signing a webhook channel', () => {
  it('starts from the channel: its stored secret by name, else a typed one', () => {
    expect(signingForm()).toEqual({ source: 'typed', secret: '', secretName: '', drop: false });
    expect(signingForm(typed)).toEqual({ source: 'typed', secret: '', secretName: '', drop: false });
    expect(signingForm(stored)).toEqual({ source: 'stored', secret: '', secretName: 'HOOK_KEY', drop: false });
  });

  it('creates with a typed secret or a stored one by name, for a webhook only', () => {
    const form = signingForm();
    expect(signingCreate(form, 'webhook')).toEqual({});
    expect(signingCreate({ ...form, secret: 's3cret' }, 'webhook')).toEqual({ secret: 's3cret' });
    expect(signingCreate({ ...form, secret: 's3cret', secretName: 'X', source: 'stored' }, 'webhook')).toEqual({
      secret_name: 'X',
    });
    expect(signingCreate({ ...form, secretName: '  HOOK_KEY ', source: 'stored' }, 'webhook')).toEqual({
      secret_name: 'HOOK_KEY',
    });
    expect(signingCreate({ ...form, secretName: ' ', source: 'stored' }, 'webhook')).toEqual({});
    expect(signingCreate({ ...form, secret: 's3cret' }, 'ntfy')).toEqual({});
    expect(signingCreate({ ...form, secretName: 'X', source: 'stored' }, 'ntfy')).toEqual({});
  });

  it('updates only what changes', () => {
    // Unchanged forms send nothing.
    expect(signingUpdate(signingForm(unsigned), unsigned)).toEqual({});
    expect(signingUpdate(signingForm(typed), typed)).toEqual({});
    expect(signingUpdate(signingForm(stored), stored)).toEqual({});
    // A new typed secret; one replacing a stored secret removes the name.
    expect(signingUpdate({ ...signingForm(typed), secret: 'new' }, typed)).toEqual({ secret: 'new' });
    expect(signingUpdate({ ...signingForm(stored), source: 'typed', secret: 'new' }, stored)).toEqual({
      secret: 'new',
      secret_name: null,
    });
    // Switching to typed with nothing typed keeps the stored secret.
    expect(signingUpdate({ ...signingForm(stored), source: 'typed' }, stored)).toEqual({});
    // A stored secret: replacing a typed one removes it; another name; emptied removes it.
    expect(signingUpdate({ ...signingForm(typed), source: 'stored', secretName: 'K' }, typed)).toEqual({
      secret_name: 'K',
      secret: null,
    });
    expect(signingUpdate({ ...signingForm(unsigned), source: 'stored', secretName: 'K' }, unsigned)).toEqual({
      secret_name: 'K',
    });
    expect(signingUpdate({ ...signingForm(stored), secretName: ' OTHER ' }, stored)).toEqual({ secret_name: 'OTHER' });
    expect(signingUpdate({ ...signingForm(stored), secretName: 'HOOK_KEY ' }, stored)).toEqual({});
    expect(signingUpdate({ ...signingForm(stored), secretName: '' }, stored)).toEqual({ secret_name: null });
  });

  it('stops signing by removing whichever secret is set', () => {
    expect(signingUpdate({ ...signingForm(typed), drop: true, secret: 'ignored' }, typed)).toEqual({ secret: null });
    expect(signingUpdate({ ...signingForm(stored), drop: true }, stored)).toEqual({ secret_name: null });
  });

  it('says in the row how a channel signs', () => {
    expect([unsigned, typed, stored].map(signedLabel)).toEqual(['no', 'yes', 'with the stored secret HOOK_KEY']);
  });

  it('suggests the server’s secrets only', () => {
    expect(
      serverSecretNames([
        { name: 'A', scopes: 'server' },
        { name: 'B', scopes: 'workspace' },
        { name: 'C', scopes: 'server, repository' },
        { name: 'D', scopes: 'workspace, server' },
      ]),
    ).toEqual(['A', 'C', 'D']);
  });
});
