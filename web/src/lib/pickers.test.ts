// Unit tests of the pickers' choices as the agent sends them.
import { describe, expect, it } from 'vitest';
import { choicesOf } from './pickers';

describe('choicesOf', () => {
  it('reads flat choices, the name defaulting to the value', () => {
    expect(choicesOf([{ value: 'a', name: 'Alpha' }, { value: 'b' }])).toEqual([
      { value: 'a', name: 'Alpha' },
      { value: 'b', name: 'b' },
    ]);
  });

  it('flattens groups of choices', () => {
    const grouped = [{ group: 'x', options: [{ value: 'a' }] }, { value: 'b', name: 'B' }];
    expect(choicesOf(grouped)).toEqual([
      { value: 'a', name: 'a' },
      { value: 'b', name: 'B' },
    ]);
  });

  it('skips what is not a choice', () => {
    expect(choicesOf([null, 3, 'x', { name: 'no value' }, { value: 7 }])).toEqual([]);
    expect(choicesOf({ value: 'a' })).toEqual([]);
    expect(choicesOf(undefined)).toEqual([]);
  });
});
