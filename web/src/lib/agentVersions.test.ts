import { describe, expect, it } from 'vitest';
import { codeSpans, compareVersions, firstToInstall, isPrerelease, updateTarget } from './agentVersions';

describe('i51 compareVersions (semver order)', () => {
  it('orders by number, not by text', () => {
    const sorted = ['1.10.0', '0.9.9', '1.2.0', '1.2.10', '1.2.9', '2.0.0', '0.24.4'].sort(compareVersions);
    expect(sorted).toEqual(['0.9.9', '0.24.4', '1.2.0', '1.2.9', '1.2.10', '1.10.0', '2.0.0']);
  });

  it('puts a pre-release before its release, numbers before words, shorter before longer', () => {
    const sorted = ['1.0.0', '1.0.0-rc.1', '1.0.0-beta.11', '1.0.0-beta.2', '1.0.0-alpha', '1.0.0-alpha.1', '1.0.0-alpha.beta', '0.9.0'].sort(
      compareVersions,
    );
    expect(sorted).toEqual(['0.9.0', '1.0.0-alpha', '1.0.0-alpha.1', '1.0.0-alpha.beta', '1.0.0-beta.2', '1.0.0-beta.11', '1.0.0-rc.1', '1.0.0']);
  });

  it('ignores build metadata, and sorts what is not a version first', () => {
    expect(compareVersions('1.0.0+build.5', '1.0.0')).toBe(0);
    expect(compareVersions('latest', '0.0.1')).toBeLessThan(0);
    expect(compareVersions('0.0.1', '^1.0.0')).toBeGreaterThan(0);
    expect(compareVersions('junk', 'junk')).toBe(0);
  });

  it('tells a pre-release', () => {
    expect(['1.0.0', '1.0.0-rc.1', '1.0.0+b', 'x'].map(isPrerelease)).toEqual([false, true, false, false]);
  });
});

describe('i51 updateTarget (the version a profile can be updated to)', () => {
  it('is the newest of installed and available above the profile’s version', () => {
    expect(updateTarget('1.0.0', ['1.0.0'], ['1.2.0', '1.10.0', '1.0.0'])).toBe('1.10.0');
    expect(updateTarget('1.0.0', ['2.0.0', '1.0.0'], ['1.5.0'])).toBe('2.0.0');
  });

  it('is null when nothing is newer, or the profile runs the command on PATH', () => {
    expect(updateTarget('2.0.0', ['2.0.0', '1.0.0'], ['1.9.0'])).toBeNull();
    expect(updateTarget(null, ['2.0.0'], ['3.0.0'])).toBeNull();
    expect(updateTarget('1.0.0', [], [])).toBeNull();
  });

  it('offers a pre-release only to a profile that runs one', () => {
    expect(updateTarget('1.0.0', [], ['2.0.0-beta.1', '1.1.0'])).toBe('1.1.0');
    expect(updateTarget('1.0.0', [], ['2.0.0-beta.1'])).toBeNull();
    expect(updateTarget('2.0.0-beta.1', [], ['2.0.0-beta.2', '1.9.0'])).toBe('2.0.0-beta.2');
    expect(updateTarget('2.0.0-beta.1', [], ['2.0.0-beta.2', '2.0.0'])).toBe('2.0.0');
  });

  it('skips what is not an exact version', () => {
    expect(updateTarget('1.0.0', [], ['latest', 'next', '1.0.1'])).toBe('1.0.1');
  });
});

describe('i51 firstToInstall (where the install picker starts)', () => {
  it('is latest unless installed, then the newest not installed', () => {
    expect(firstToInstall(['2.0.0-rc.1', '1.1.0', '1.0.0'], '1.1.0', [])).toBe('1.1.0');
    expect(firstToInstall(['1.1.0', '1.0.0'], '1.1.0', ['1.1.0'])).toBe('1.0.0');
    expect(firstToInstall(['1.1.0', '1.0.0'], null, [])).toBe('1.1.0');
    expect(firstToInstall(['1.0.0'], '1.0.0', ['1.0.0'])).toBe('');
  });
});

describe('i51 codeSpans (a login hint with its commands as code)', () => {
  it('marks what is between backticks', () => {
    expect(codeSpans('run `copilot` and log in with /login, or set GH_TOKEN')).toEqual([
      { text: 'run ', code: false },
      { text: 'copilot', code: true },
      { text: ' and log in with /login, or set GH_TOKEN', code: false },
    ]);
    expect(codeSpans('`auggie login`')).toEqual([{ text: 'auggie login', code: true }]);
    expect(codeSpans('no login needed')).toEqual([{ text: 'no login needed', code: false }]);
  });

  it('leaves an unmatched backtick as text', () => {
    expect(codeSpans('a `b` c `d')).toEqual([
      { text: 'a ', code: false },
      { text: 'b', code: true },
      { text: ' c ', code: false },
      { text: '`d', code: false },
    ]);
  });
});
