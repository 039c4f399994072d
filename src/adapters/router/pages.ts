/**
 * The pages the router itself answers with, shared by every driver so that a user sees the same
 * thing whichever data plane runs. Static on purpose: nginx serves them as files, and a page
 * never echoes the request (no Host header reflected into HTML).
 */
export interface RouterPage {
  readonly status: 502 | 503;
  /** the file name nginx serves it under */
  readonly file: string;
  readonly heading: string;
  readonly html: string;
}

function page(status: 502 | 503, file: string, heading: string, detail: string): RouterPage {
  const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>${status} ${heading}</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#222}small{color:#777}</style>
</head>
<body>
<h1>${heading}</h1>
<p>${detail}</p>
<p><small>${status} · Slipway router</small></p>
</body>
</html>
`;
  return { status, file, heading, html };
}

export const PAGES = {
  unknownHost: page(
    503,
    '503-unknown-host.html',
    'No app is served at this address',
    'No Slipway project has this domain. If you just added it, check the spelling of the domain in the project settings, and that it is verified: a custom domain is served once its DNS record proves it.',
  ),
  notRunning: page(
    503,
    '503-not-running.html',
    'This app is not running',
    'The project exists but none of its replicas is running: it may be stopped, deploying for the first time, or crashed. Try again in a moment.',
  ),
  badGateway: page(
    502,
    '502.html',
    'The app did not answer',
    'The router reached no running replica of this app, or the app closed the connection without a response. Check the app&#39;s logs.',
  ),
} as const satisfies Record<string, RouterPage>;
