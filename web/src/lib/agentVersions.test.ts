import { describe, expect, it } from 'vitest';
import { codeSpans, compareVersions, executorOf, firstToInstall, installPlaces, isPrerelease, THIS_MACHINE, updateTarget } from './agentVersions';

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
    expect(codeSpans("run `auggie login`, or set AUGMENT_SESSION_AUTH (what `auggie token print` prints) in the profile's env")).toEqual([
      { text: 'run ', code: false },
      { text: 'auggie login', code: true },
      { text: ', or set AUGMENT_SESSION_AUTH (what ', code: false },
      { text: 'auggie token print', code: true },
      { text: " prints) in the profile's env", code: false },
    ]);
    expect(codeSpans('`copilot login`')).toEqual([{ text: 'copilot login', code: true }]);
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

describe('i51 installPlaces (where the versions panel installs)', () => {
  const ssh = { host: 'build1.example', port: 22, user: 'build', identity_file: '/k', known_hosts: '/h', remote_home: '/home/build/.kandev' };
  const executors = [
    { id: 'e1', name: 'here', kind: 'local' as const, ssh: null },
    { id: 'e2', name: 'build1', kind: 'ssh' as const, ssh },
    { id: 'e3', name: 'box', kind: 'container' as const, ssh: null },
  ];

  it('offers this machine, then each SSH executor, but not local or container ones (they run this machine\'s installs)', () => {
    expect(installPlaces(executors)).toEqual([
      THIS_MACHINE,
      { id: 'e2', label: 'build1 (SSH, build@build1.example)', where: "on build1's build host" },
    ]);
    expect(THIS_MACHINE).toMatchObject({ id: '', label: 'This machine (local and container executors)' });
  });

  it('offers this machine alone while the executors are unread or refused', () => {
    expect(installPlaces(null)).toEqual([THIS_MACHINE]);
    expect(installPlaces([])).toEqual([THIS_MACHINE]);
  });

  it('names the executor in a request only for a build host', () => {
    expect(executorOf('')).toEqual({});
    expect(executorOf('e2')).toEqual({ executor_id: 'e2' });
  });
});
