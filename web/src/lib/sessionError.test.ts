// Unit tests of how a session's last error is read for the user.
import { describe, expect, it } from 'vitest';
import { authMethods, errorHint } from './sessionError';

describe('authMethods', () => {
  it('reads the methods, the name defaulting to the id', () => {
    const details = {
      auth_methods: [
        { id: 'login', name: 'Browser login', command: 'agent login', env_vars: ['TOKEN', 3] },
        { id: 'key' },
      ],
    };
    expect(authMethods(details)).toEqual([
      { id: 'login', name: 'Browser login', description: undefined, command: 'agent login', env_vars: ['TOKEN'] },
      { id: 'key', name: 'key', description: undefined, command: undefined, env_vars: undefined },
    ]);
  });

  it('skips methods without an id and details without methods', () => {
    expect(authMethods({ auth_methods: [{ name: 'no id' }, null, { id: '' }] })).toEqual([]);
    expect(authMethods(null)).toEqual([]);
    expect(authMethods({ auth_methods: 'x' })).toEqual([]);
  });
});

describe('errorHint', () => {
  it('gives a hint per error code, and a general one otherwise', () => {
    expect(errorHint('agent_start_failed')).toMatch(/agent profile/);
    expect(errorHint('agent_auth_required')).toMatch(/Log in/);
    expect(errorHint('something_else')).toMatch(/resume the session/);
  });
});
