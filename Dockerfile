# syntax=docker/dockerfile:1
#
# One image for every role of the service: `api` (default), `worker` and `migrate`
# (see docker-compose.yml). Node 26, the Active LTS line (support until April 2029), runs the
# TypeScript sources itself: it strips the types (every file uses erasable syntax only), so
# production has no compile step and no run-time transpiler (tsx is a dev dependency, for
# Node 20 machines). Only the Temporal workflow bundle is built ahead of time, so that
# workers start without running webpack.
FROM node:26-bookworm-slim

# HOST: a container is reached from outside it, never on its loopback.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false

WORKDIR /app

# Dependencies first, so that this layer is cached until the lockfile changes.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force

COPY tsconfig.json ./
COPY src ./src
COPY workflows ./workflows
COPY activities ./activities
COPY drizzle ./drizzle
COPY scripts ./scripts
COPY bin ./bin
# The CLI as `webhooks` on the PATH (docker compose run --rm api webhooks --help).
RUN ln -s /app/bin/webhooks.mjs /usr/local/bin/webhooks

# Writes dist/workflow-bundle.js (WORKFLOW_BUNDLE_PATH defaults to it) and, beside it,
# dist/workflow-bundle.tracing.js, which a worker with tracing on (OTEL_* set) runs.
RUN npm run build:workflows

# Sources stay root-owned and read-only for the runtime user; only the data
# directory (DATA_DIR, unused when DATABASE_URL is set) is writable.
RUN mkdir -p .data && chown node:node .data
USER node

EXPOSE 8080
# The api role's readiness (the worker role has no API: compose gives it a check of its own).
# No spaces in the script: podman's Docker API splits a check's arguments on spaces.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then((r)=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["npm", "run", "api"]
