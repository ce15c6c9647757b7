// What the UI keeps in the browser (localStorage): the settings, the
// conversations, and the slot file names it saved (offered on restore).
const KEY_SETTINGS = 'kvault.settings';
const KEY_CONVS = 'kvault.conversations';
const KEY_FILES = 'kvault.slotFiles';

export const DEFAULT_SETTINGS = {
  apiKey: '', system: '', temperature: 0.8, top_k: 40, top_p: 0.95,
  min_p: 0.05, n_predict: 256, seed: -1,
};

function load(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v === null || v === undefined ? fallback : v;
  } catch (e) {
    return fallback;
  }
}

function save(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch (e) { /* storage full or disabled: the page still works */ }
}

export const settings = { ...DEFAULT_SETTINGS, ...load(KEY_SETTINGS, {}) };
export function saveSettings() { save(KEY_SETTINGS, settings); }

// Conversations: [{id, title, mode, messages: [{role, content, stats?}]}],
// most recent first.
export const conversations = load(KEY_CONVS, []);
export function saveConversations() { save(KEY_CONVS, conversations); }

export function newConversation(mode) {
  const c = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 6),
              title: 'New conversation', mode, messages: [] };
  conversations.unshift(c);
  saveConversations();
  return c;
}

export function deleteConversation(id) {
  const i = conversations.findIndex((c) => c.id === id);
  if (i >= 0) conversations.splice(i, 1);
  saveConversations();
}

export const slotFiles = load(KEY_FILES, []);
export function rememberSlotFile(name) {
  const i = slotFiles.indexOf(name);
  if (i >= 0) slotFiles.splice(i, 1);
  slotFiles.unshift(name);
  slotFiles.length = Math.min(slotFiles.length, 20);
  save(KEY_FILES, slotFiles);
}
