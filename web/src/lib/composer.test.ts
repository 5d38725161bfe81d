// Unit tests of what the composer's menu offers while a message is typed.
import { describe, expect, it } from 'vitest';
import type { AvailableCommandDto } from '../api/types';
import { commandMatches, promptMention } from './composer';

const command = (name: string) => ({ name, description: '', input_hint: null }) as AvailableCommandDto;

describe('commandMatches', () => {
  const commands = [command('review'), command('Reset'), command('plan')];

  it('offers the commands starting with what is typed, in any case', () => {
    expect(commandMatches('/re', commands).map((c) => c.name)).toEqual(['review', 'Reset']);
    expect(commandMatches('/', commands)).toHaveLength(3);
  });

  it('offers nothing once the command has arguments, or without a slash', () => {
    expect(commandMatches('/review now', commands)).toEqual([]);
    expect(commandMatches('re', commands)).toEqual([]);
  });
});

describe('promptMention', () => {
  it('finds the @name typed at the end, after a space or at the start', () => {
    expect(promptMention('@Fix')).toEqual({ at: 0, typed: 'fix' });
    expect(promptMention('please @sum')).toEqual({ at: 7, typed: 'sum' });
    expect(promptMention('please @')).toEqual({ at: 7, typed: '' });
  });

  it('finds none inside a word or once the name is done', () => {
    expect(promptMention('me@host')).toBeNull();
    expect(promptMention('@fix it')).toBeNull();
  });
});
