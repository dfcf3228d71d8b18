# Ringlab web app (and, with WITH_TORCH=1, a grading worker image).
#   docker build -t ringlab .
#   docker run -p 8000:8000 -v ringlab-data:/app/data ringlab
FROM python:3.11-slim

ARG WITH_TORCH=0
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 RINGLAB_DATA_DIR=/app/data

RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap libseccomp2 postgresql-client nodejs npm \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error

COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY labs ./labs
# WITH_TORCH=1: the worker extra (torch 2.13.0, numpy, accelerate), what a grading worker imports.
RUN if [ "$WITH_TORCH" = 1 ]; then pip install --no-cache-dir ".[worker]"; else pip install --no-cache-dir .; fi

COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
COPY content ./content
RUN mkdir -p static/vendor/htmx static/vendor/pico static/vendor/codemirror static/vendor/swagger-ui data \
 && cp node_modules/htmx.org/dist/htmx.min.js static/vendor/htmx/ \
 && cp node_modules/@picocss/pico/css/pico.min.css static/vendor/pico/ \
 && cp node_modules/codemirror/lib/codemirror.js node_modules/codemirror/lib/codemirror.css \
       node_modules/codemirror/mode/python/python.js node_modules/codemirror/addon/edit/matchbrackets.js \
       static/vendor/codemirror/ \
 && cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css static/vendor/swagger-ui/

EXPOSE 8000
HEALTHCHECK CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
CMD ["ringlab", "serve", "--host", "0.0.0.0", "--port", "8000"]
