// Customer portal: the pages work without this script; it adds live refresh and secret selection.
'use strict';

// A section marked data-live="<ms>" is fetched again after that long and replaced while the
// server still marks it live (deliveries in flight, a bulk retry running). A round is skipped
// while the reader's focus is inside it or the tab is hidden, so nothing moves under them.
function scheduleRefresh(section) {
  const interval = Number(section.dataset.live) || 3000;
  setTimeout(() => refresh(section), interval);
}

async function refresh(section) {
  if (document.hidden || section.contains(document.activeElement)) {
    scheduleRefresh(section);
    return;
  }
  let response;
  try {
    response = await fetch(location.href, { credentials: 'same-origin', headers: { Accept: 'text/html' } });
  } catch {
    scheduleRefresh(section);
    return;
  }
  if (!response.ok) return; // Signed out or gone: the next click shows why.
  const fresh = new DOMParser().parseFromString(await response.text(), 'text/html').getElementById(section.id);
  if (!fresh) return;
  section.replaceWith(fresh);
  if (fresh.hasAttribute('data-live')) scheduleRefresh(fresh);
}

for (const section of document.querySelectorAll('[data-live]')) scheduleRefresh(section);

for (const input of document.querySelectorAll('[data-select-on-focus]')) {
  input.addEventListener('focus', () => input.select());
}
