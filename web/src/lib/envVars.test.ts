import { describe, expect, it } from 'vitest';
import { EMPTY_ENV, fromEnv, fromRefs, isEnvName, SECRET_MASK, splitRefs, toEnv, type EnvDraft } from './envVars';

const value = (name: string, v: string, saved: string | null = null): EnvDraft => ({ name, value: v, saved, secret: null });
const ref = (name: string, secret: string): EnvDraft => ({ name, value: '', saved: null, secret });

describe('fromEnv (a profile’s env as the form edits it)', () => {
  it('shows a stored value as an empty field kept under its name, a typed one as it is, a reference as its secret', () => {
    expect(
      fromEnv([
        { name: 'API_KEY', value: SECRET_MASK },
        { name: 'REGION', value: 'eu' },
        { name: 'TOKEN', value: '', secret: 'OPENAI_API_KEY' },
      ]),
    ).toEqual([value('API_KEY', '', 'API_KEY'), value('REGION', 'eu'), ref('TOKEN', 'OPENAI_API_KEY')]);
  });
});

describe('toEnv (the env to send)', () => {
  it('sends the mask for a kept value, a typed value as it is, and a reference with an empty value', () => {
    expect(toEnv([value('API_KEY', '', 'API_KEY'), value('REGION', 'us', 'REGION'), ref(' TOKEN ', ' OPENAI_API_KEY ')])).toEqual([
      { name: 'API_KEY', value: SECRET_MASK },
      { name: 'REGION', value: 'us' },
      { name: 'TOKEN', value: '', secret: 'OPENAI_API_KEY' },
    ]);
  });

  it('leaves out blank rows, also one switched to a secret', () => {
    expect(toEnv([EMPTY_ENV, ref('', ''), value('A', '1')])).toEqual([{ name: 'A', value: '1' }]);
  });

  it('never sends the value typed before a row was switched to a secret', () => {
    expect(toEnv([{ name: 'TOKEN', value: 'typed', saved: 'TOKEN', secret: 'KEY' }])).toEqual([{ name: 'TOKEN', value: '', secret: 'KEY' }]);
  });

  it('refuses bad and repeated names, a reference without a secret or with a bad one, and a kept value renamed', () => {
    expect(toEnv([value('2BAD', 'x')])).toMatch(/“2BAD” is not a valid name/);
    expect(toEnv([value('A', '1'), ref('A', 'KEY')])).toBe('Environment variable A is listed twice.');
    expect(toEnv([ref('TOKEN', ' ')])).toBe('Environment variable TOKEN: choose the secret it takes its value from.');
    expect(toEnv([ref('TOKEN', 'my-key')])).toMatch(/^Environment variable TOKEN: “my-key” is not a secret’s name/);
    expect(toEnv([value('NEW_NAME', '', 'OLD_NAME')])).toMatch(/^Give a value for NEW_NAME/);
  });

  it('reads back what it sent', () => {
    const drafts = [value('API_KEY', '', 'API_KEY'), ref('TOKEN', 'KEY')];
    const sent = toEnv(drafts);
    if (typeof sent === 'string') throw new Error(sent);
    expect(fromEnv(sent)).toEqual(drafts);
  });
});

describe('isEnvName', () => {
  it('takes letters, digits and _, not starting with a digit', () => {
    expect(['A', '_a1', 'OPENAI_API_KEY'].map(isEnvName)).toEqual([true, true, true]);
    expect(['', '1A', 'A-B', 'A B'].map(isEnvName)).toEqual([false, false, false, false]);
  });
});

describe('splitRefs and fromRefs (an MCP server’s env or headers)', () => {
  it('keeps the values for the text lines and the references for the rows', () => {
    expect(
      splitRefs([
        { name: 'Authorization', value: SECRET_MASK },
        { name: 'X-Key', value: '', secret: 'DOCS_KEY' },
      ]),
    ).toEqual({ values: [{ name: 'Authorization', value: SECRET_MASK }], refs: [{ name: 'X-Key', secret: 'DOCS_KEY' }] });
  });

  it('sends each reference with an empty value, trimmed, blank rows left out', () => {
    expect(fromRefs([{ name: ' X-Key ', secret: ' DOCS_KEY ' }, { name: '', secret: '' }])).toEqual([
      { name: 'X-Key', value: '', secret: 'DOCS_KEY' },
    ]);
  });
});
