// Browser notifications (issue 18): each notification record the server writes (a permission
// request, a question, a finished turn, a failed session, a pull request change) arrives on the `notifications` topic; while the tab is in the
// background it raises a system notification, and clicking it opens the task. Following the
// topic with replay (useLiveQuery) means records written while the connection was down are
// still announced once it is back. Permission is asked on first use (the header's button).
// While the tab is hidden, records also count in the title's badge and play the sound (a
// setting, off by default).
import { useCallback, useEffect, useState } from 'react';
import type { Notification as Frame, NotificationRecordDto } from '../api/types';
import { navigate, taskPath } from './router';
import { useLiveQuery } from './useLiveQuery';

type Permission = NotificationPermission | 'unsupported';

declare global {
  interface Window {
    /** How many times the notification sound played (read by the browser tests). */
    __kandevSounds?: number;
  }
}

const supported = () => typeof window !== 'undefined' && 'Notification' in window;

// The sound setting: off by default (a page that beeps unasked is worse than a silent one);
// kept per browser in localStorage, changed in Settings › Notifications.
const SOUND_KEY = 'kandev.notify.sound';
const soundListeners = new Set<(on: boolean) => void>();

export function soundOn(): boolean {
  try {
    return window.localStorage.getItem(SOUND_KEY) === 'on';
  } catch {
    return false;
  }
}

export function setSound(on: boolean): void {
  try {
    window.localStorage.setItem(SOUND_KEY, on ? 'on' : 'off');
  } catch {
    // storage refused (private mode): the setting lasts for this page only
  }
  soundListeners.forEach((l) => l(on));
}

/** The sound setting, live. */
export function useSoundSetting(): [boolean, (on: boolean) => void] {
  const [on, setOn] = useState(soundOn);
  useEffect(() => {
    soundListeners.add(setOn);
    return () => void soundListeners.delete(setOn);
  }, []);
  return [on, setSound];
}

/** A short two-tone chime made with Web Audio (no sound file to fetch). */
export function playChime(): void {
  window.__kandevSounds = (window.__kandevSounds ?? 0) + 1;
  try {
    const ctx = new AudioContext();
    const gain = ctx.createGain();
    gain.gain.value = 0.08;
    gain.connect(ctx.destination);
    [880, 1175].forEach((hz, i) => {
      const tone = ctx.createOscillator();
      tone.frequency.value = hz;
      tone.connect(gain);
      tone.start(ctx.currentTime + i * 0.12);
      tone.stop(ctx.currentTime + i * 0.12 + 0.1);
      if (i === 1) tone.onended = () => void ctx.close();
    });
  } catch {
    // no audio output: the title badge and the system notification remain
  }
}

// Records that arrived while the tab was in the background: the title's badge, "(2 new)",
// cleared when the tab is shown again.
let unseen = 0;
const unseenListeners = new Set<(n: number) => void>();
function setUnseen(n: number) {
  unseen = n;
  unseenListeners.forEach((l) => l(n));
}
if (typeof document !== 'undefined') {
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && unseen > 0) setUnseen(0);
  });
}

/** How many notification records arrived while the tab was in the background. */
export function useUnseen(): number {
  const [n, setN] = useState(unseen);
  useEffect(() => {
    unseenListeners.add(setN);
    setN(unseen);
    return () => void unseenListeners.delete(setN);
  }, []);
  return n;
}

const BODY: Record<NotificationRecordDto['kind'], string> = {
  permission_requested: 'The agent is waiting for your answer.',
  question_asked: 'The agent asks you a question.',
  turn_completed: 'The agent finished its turn.',
  session_failed: 'The session failed.',
  pr_state_changed: 'A pull request changed.',
};

/** A record arrived: while the tab is hidden it counts in the title's badge, plays the sound
 * (when on) and raises the system notification (when allowed); clicking that opens the task. */
function raise(record: NotificationRecordDto): void {
  if (document.visibilityState !== 'hidden') return; // the page itself shows it
  setUnseen(unseen + 1);
  if (soundOn()) playChime();
  if (!supported() || window.Notification.permission !== 'granted') return;
  try {
    const shown = new window.Notification(record.title, { body: BODY[record.kind], tag: record.id });
    shown.onclick = () => {
      window.focus();
      navigate(taskPath(record.task_id, record.session_id));
      shown.close();
    };
  } catch {
    // Some browsers allow notifications only from a service worker: the title badge remains.
  }
}

const load = async () => true;
const apply = (data: boolean, n: Frame) => {
  if (n.topic === 'notifications' && n.action === 'notification.created') raise(n.payload.notification);
  return data;
};

/** Follows the `notifications` topic; returns the permission and how to ask for it. */
export function useBrowserNotifications(): { permission: Permission; ask: () => void } {
  useLiveQuery('notifications', load, apply);
  const [permission, setPermission] = useState<Permission>(supported() ? window.Notification.permission : 'unsupported');
  useEffect(() => {
    if (supported()) setPermission(window.Notification.permission);
  }, []);
  const ask = useCallback(() => {
    if (!supported()) return;
    void window.Notification.requestPermission().then(setPermission);
  }, []);
  return { permission, ask };
}
