// The built-in analyzer on logs as apps really print them: what a user sees for each failure.
import { describe, expect, it } from 'vitest';
import { analyze, formatCount, summarize } from './analyzer.js';

const NODE_CRASH = `
> web@1.0.0 start
> node src/server.js

/app/src/server.js:12
    const port = config.server.port;
                               ^

TypeError: Cannot read properties of undefined (reading 'port')
    at Object.<anonymous> (/app/src/server.js:12:32)
    at Module._compile (node:internal/modules/cjs/loader:1256:14)
    at Module._extensions..js (node:internal/modules/cjs/loader:1310:10)
    at Module.load (node:internal/modules/cjs/loader:1119:32)
    at Module._load (node:internal/modules/cjs/loader:960:12)
    at Function.executeUserEntryPoint [as runMain] (node:internal/modules/run_main:86:12)
    at node:internal/main/run_main_module:23:47

Node.js v20.11.1`;

const PYTHON_TRACEBACK = `INFO:     Started server process [1]
INFO:     Waiting for application startup.
Traceback (most recent call last):
  File "/app/main.py", line 3, in <module>
    from app.db import engine
  File "/app/app/db.py", line 9, in <module>
    engine = create_engine(parse_url(settings.db_url))
  File "/app/app/db.py", line 5, in parse_url
    raise ValueError(f"unsupported database URL scheme: {scheme}")
  File "/usr/local/lib/python3.12/site-packages/sqlalchemy/engine/create.py", line 550, in create_engine
    u = _url.make_url(url)
ValueError: unsupported database URL scheme: mysql`;

const GO_PANIC = `2024/05/01 10:00:00 starting server on :8080
panic: assignment to entry in nil map

goroutine 1 [running]:
panic({0x6b3f20?, 0xc000012345?})
	/usr/local/go/src/runtime/panic.go:770 +0x132
main.(*Registry).Add(...)
	/app/registry.go:23
main.main()
	/app/main.go:12 +0x1d
exit status 2`;

const JAVA_EXCEPTION = `Exception in thread "main" java.lang.IllegalStateException: Database URL not configured
	at com.example.db.Pool.connect(Pool.java:27)
	at com.example.App.main(App.java:5)
	at java.base/jdk.internal.reflect.DirectMethodHandleAccessor.invoke(DirectMethodHandleAccessor.java:103)`;

const KERNEL_OOM = `[ 1234.567890] node invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
[ 1234.567900] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=docker-abc,mems_allowed=0,oom_memcg=/docker/abc,task_memcg=/docker/abc,task=node,pid=4321,uid=1000
[ 1234.567910] Memory cgroup out of memory: Killed process 4321 (node) total-vm:1234567kB, anon-rss:512000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:2048kB oom_score_adj:0
[ 1234.600000] oom_reaper: reaped process 4321 (node), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB`;

const EADDRINUSE = `Server starting...
node:events:497
      throw er; // Unhandled 'error' event
      ^

Error: listen EADDRINUSE: address already in use :::3000
    at Server.setupListenHandle [as _listen2] (node:net:1872:16)
    at listenInCluster (node:net:1920:12)
    at Server.listen (node:net:2008:7)
    at Object.<anonymous> (/app/index.js:20:8)
Emitted 'error' event on Server instance at:
    at emitErrorNT (node:net:1899:8)
    at process.processTicksAndRejections (node:internal/process/task_queues:82:21) {
  code: 'EADDRINUSE',
  errno: -98,
  syscall: 'listen',
  address: '::',
  port: 3000
}

Node.js v20.11.1`;

const severityOf = (text: string) => analyze(text).issues.map((i) => [i.pattern, i.severity]);

describe('unhandled exceptions and panics, with their first frame in the app', () => {
  it('Node: the uncaught TypeError at its frame in /app, past node:internal', () => {
    expect(analyze(NODE_CRASH)).toEqual({
      summary: '1 issue in 18 lines: TypeError at /app/src/server.js:12 in Object.<anonymous> (1×).',
      issues: [
        {
          pattern: 'TypeError at /app/src/server.js:12 in Object.<anonymous>',
          count: 1,
          severity: 'critical',
          example: "TypeError: Cannot read properties of undefined (reading 'port')",
          hint: 'An uncaught TypeError ("Cannot read properties of undefined (reading \'port\')") is thrown at /app/src/server.js:12 in Object.<anonymous>: fix or catch it there, then redeploy.',
        },
      ],
      analyzer: 'builtin',
    });
  });

  it('Node: frames in node_modules are skipped, a logged error is an error, not a crash', () => {
    const logs = `Error: Request failed with status code 502
    at createError (/app/node_modules/axios/lib/core/createError.js:16:15)
    at settle (/app/node_modules/axios/lib/core/settle.js:17:12)
    at async fetchPrices (/app/src/prices.js:31:17)
    at async /app/src/jobs/refresh.js:8:5`;
    const [issue] = analyze(logs).issues;
    expect(issue).toMatchObject({ pattern: 'Error at /app/src/prices.js:31 in fetchPrices', count: 1, severity: 'error' });
    expect(issue?.hint).toBe('An Error ("Request failed with status code 502") is thrown at /app/src/prices.js:31 in fetchPrices: fix its cause there, then redeploy.');
  });

  it('Python: the innermost frame of the app, past site-packages', () => {
    expect(analyze(PYTHON_TRACEBACK).issues).toEqual([
      {
        pattern: 'ValueError at /app/app/db.py:5 in parse_url',
        count: 1,
        severity: 'critical',
        example: 'ValueError: unsupported database URL scheme: mysql',
        hint: 'An uncaught ValueError ("unsupported database URL scheme: mysql") is thrown at /app/app/db.py:5 in parse_url: fix or catch it there, then redeploy.',
      },
    ]);
  });

  it('Python: a traceback logged by logging.exception counts each time, as an error, together with its log line', () => {
    const once = `ERROR:app:Unhandled error in /orders
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/site-packages/flask/app.py", line 880, in full_dispatch_request
    rv = self.dispatch_request()
  File "/app/orders.py", line 41, in create_order
    total = sum(item["price"] for item in items)
KeyError: 'price'`;
    const { issues } = analyze(`${once}\n${once}\n${once}`);
    expect(issues).toEqual([
      {
        pattern: 'KeyError at /app/orders.py:41 in create_order',
        count: 3,
        severity: 'error',
        example: "KeyError: 'price'",
        hint: 'A KeyError ("\'price\'") is thrown at /app/orders.py:41 in create_order: fix its cause there, then redeploy.',
      },
    ]);
  });

  it('Go: the panic at the first frame outside the runtime', () => {
    expect(analyze(GO_PANIC).issues).toEqual([
      {
        pattern: 'panic at /app/registry.go:23 in main.(*Registry).Add',
        count: 1,
        severity: 'critical',
        example: 'panic: assignment to entry in nil map',
        hint: 'The app panics at /app/registry.go:23 in main.(*Registry).Add (assignment to entry in nil map): fix it there, then redeploy.',
      },
    ]);
  });

  it('Java: the uncaught exception at its first frame outside java.*', () => {
    expect(analyze(JAVA_EXCEPTION).issues).toEqual([
      {
        pattern: 'java.lang.IllegalStateException at Pool.java:27 in com.example.db.Pool.connect',
        count: 1,
        severity: 'critical',
        example: 'Exception in thread "main" java.lang.IllegalStateException: Database URL not configured',
        hint: 'An uncaught java.lang.IllegalStateException ("Database URL not configured") is thrown at Pool.java:27 in com.example.db.Pool.connect: fix or catch it there, then redeploy.',
      },
    ]);
  });

  it('Java: a logged exception with a cause, behind a Spring frame', () => {
    const logs = `2024-05-01 10:00:00.123 ERROR 1 --- [nio-8080-exec-1] o.a.c.c.C.[.[.[/].[dispatcherServlet]    : Servlet.service() threw exception
java.lang.NullPointerException: Cannot invoke "com.example.User.getName()" because "user" is null
	at org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet.java:883)
	at com.example.web.UserController.show(UserController.java:42)
	at java.base/java.lang.Thread.run(Thread.java:1583)
Caused by: java.lang.RuntimeException: lookup failed
	at com.example.repo.UserRepo.find(UserRepo.java:10)
	... 3 more`;
    expect(analyze(logs).issues.map((i) => [i.pattern, i.count, i.severity])).toEqual([
      ['java.lang.NullPointerException at UserController.java:42 in com.example.web.UserController.show', 1, 'error'],
    ]);
  });
});

describe('out of memory', () => {
  it("the kernel's OOM kill is one event, naming the process", () => {
    expect(analyze(KERNEL_OOM).issues).toEqual([
      {
        pattern: 'OOM kill: the kernel killed a process for lack of memory',
        count: 1,
        severity: 'critical',
        example: '[ 1234.567910] Memory cgroup out of memory: Killed process 4321 (node) total-vm:1234567kB, anon-rss:512000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:2048kB oom_score_adj:0',
        hint: "The container ran out of memory and the kernel killed node: raise the project's ram, or make the app use less memory (fewer workers, a smaller cache).",
      },
    ]);
  });

  it('two kills with the exit codes seen from outside are two events of one issue', () => {
    const logs = `container exited with code 137\n${KERNEL_OOM}\ncontainer exited with code 137\n${KERNEL_OOM.replace(/4321/g, '4400')}`;
    expect(analyze(logs).issues.map((i) => [i.pattern, i.count])).toEqual([['OOM kill: the kernel killed a process for lack of memory', 2]]);
  });

  it('exit code 137, OOMKilled, the Node heap and the JVM heap', () => {
    expect(severityOf('> next build\nCreating an optimized production build ...\nKilled')).toEqual([['OOM kill: the app was killed (exit code 137)', 'critical']]);
    expect(severityOf('container exited with code 137\nState: OOMKilled')).toEqual([['OOM kill: the app was killed (exit code 137)', 'critical']]);
    expect(analyze('container exited with code 137\nState: OOMKilled').issues[0]?.count).toBe(2);
    const node = `<--- Last few GCs --->
FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory
 1: 0xb7b3e0 node::Abort() [node]`;
    expect(analyze(node).issues).toEqual([expect.objectContaining({ pattern: 'Out of memory: JavaScript heap out of memory', count: 1, severity: 'critical' })]);
    expect(analyze(node).issues[0]?.hint).toContain('NODE_OPTIONS=--max-old-space-size');
    const java = `Exception in thread "main" java.lang.OutOfMemoryError: Java heap space
	at java.base/java.util.Arrays.copyOf(Arrays.java:3537)
	at com.example.Cache.load(Cache.java:20)`;
    expect(analyze(java).issues).toEqual([expect.objectContaining({ pattern: 'Out of memory: java.lang.OutOfMemoryError: Java heap space', count: 1, severity: 'critical' })]);
  });
});

describe('port already in use', () => {
  it('Node EADDRINUSE names the port and is reported once, not again as an exception or by its properties', () => {
    expect(analyze(EADDRINUSE).issues).toEqual([
      {
        pattern: 'Port 3000 already in use',
        count: 1,
        severity: 'critical',
        example: 'Error: listen EADDRINUSE: address already in use :::3000',
        hint: "Port 3000 is already taken inside the container: start the app's server only once, listening on the PORT variable Slipway sets (the project's port).",
      },
    ]);
  });

  it('Go, Python, Java and nginx spellings', () => {
    const logs = [
      '2024/05/01 10:00:00 listen tcp :8080: bind: address already in use',
      "[Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
      'Web server failed to start. Port 9090 was already in use.',
      '2024/05/01 10:00:00 [emerg] 1#1: bind() to 0.0.0.0:80 failed (98: Address already in use)',
    ].join('\n');
    expect(analyze(logs).issues.map((i) => i.pattern)).toEqual(['Port 8080 already in use', 'Port 8000 already in use', 'Port 9090 already in use', 'Port 80 already in use']);
  });
});

describe('missing environment variables', () => {
  it('names the variable, from os.environ, a message, envconfig, and envalid', () => {
    const logs = `Traceback (most recent call last):
  File "/app/app.py", line 4, in <module>
    DATABASE_URL = os.environ["DATABASE_URL"]
  File "<frozen os>", line 714, in __getitem__
KeyError: 'DATABASE_URL'
Error: Missing required environment variable REDIS_URL
2024/01/01 12:00:00 envconfig: required key STRIPE_KEY missing value
================================
 Missing environment variables:
    SESSION_SECRET: undefined
    SMTP_HOST: undefined
================================`;
    const { issues } = analyze(logs);
    expect(issues.map((i) => [i.pattern, i.count, i.hint])).toEqual([
      ['Missing environment variable DATABASE_URL', 1, "Set DATABASE_URL in the project's environment variables and redeploy."],
      ['Missing environment variable REDIS_URL', 1, "Set REDIS_URL in the project's environment variables and redeploy."],
      ['Missing environment variable STRIPE_KEY', 1, "Set STRIPE_KEY in the project's environment variables and redeploy."],
      ['Missing environment variable SESSION_SECRET', 1, "Set SESSION_SECRET in the project's environment variables and redeploy."],
      ['Missing environment variable SMTP_HOST', 1, "Set SMTP_HOST in the project's environment variables and redeploy."],
    ]);
    // the traceback behind the KeyError is part of the missing variable, not a second issue
    expect(issues[0]?.example).toBe("KeyError: 'DATABASE_URL'");
  });

  it('names the variable from Prisma, Django and pydantic-settings', () => {
    const logs = `Error: Environment variable not found: DATABASE_URL.
  -->  schema.prisma:10
django.core.exceptions.ImproperlyConfigured: Set the SECRET_KEY environment variable
pydantic_core._pydantic_core.ValidationError: 2 validation errors for Settings
redis_url
  Field required [type=missing, input_value={}, input_type=dict]
smtp_password
  Field required [type=missing, input_value={}, input_type=dict]`;
    expect(analyze(logs).issues.map((i) => [i.pattern, i.count])).toEqual([
      ['Missing environment variable DATABASE_URL', 1],
      ['Missing environment variable SECRET_KEY', 1],
      ['Missing environment variable REDIS_URL', 1],
      ['Missing environment variable SMTP_PASSWORD', 1],
    ]);
  });

  it('an undefined name in code is no variable', () => {
    const logs = `ReferenceError: URL is not defined
    at main (/app/index.js:3:1)
NameError: name 'API_BASE' is not defined`;
    expect(analyze(logs).issues.map((i) => i.pattern)).toEqual(['ReferenceError at /app/index.js:3 in main', "NameError: name <*> is not defined"]);
  });

  it('a KeyError away from os.environ is an exception, not a variable', () => {
    const logs = `Traceback (most recent call last):
  File "/app/app.py", line 9, in handler
    return PRICES["GOLD"]
KeyError: 'GOLD'`;
    expect(analyze(logs).issues.map((i) => i.pattern)).toEqual(['KeyError at /app/app.py:9 in handler']);
  });
});

describe('connection refused', () => {
  it('names the target from Node, Go, psycopg, redis-py and Java, and explains localhost', () => {
    const logs = `Error: connect ECONNREFUSED 127.0.0.1:5432
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16) {
  errno: -111,
  code: 'ECONNREFUSED',
  syscall: 'connect',
  address: '127.0.0.1',
  port: 5432
}
Error: connect ECONNREFUSED 127.0.0.1:5432
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)
2024/01/01 12:00:00 dial tcp 10.0.0.5:6379: connect: connection refused`;
    const { issues } = analyze(logs);
    expect(issues).toEqual([
      {
        pattern: 'Connection refused to 127.0.0.1:5432',
        count: 2,
        severity: 'error',
        example: 'Error: connect ECONNREFUSED 127.0.0.1:5432',
        hint: "Nothing listens on 127.0.0.1:5432 inside the app's container: point the app at the service's own address (for a database, its connection URL in the environment variables), not at localhost.",
      },
      {
        pattern: 'Connection refused to 10.0.0.5:6379',
        count: 1,
        severity: 'error',
        example: '2024/01/01 12:00:00 dial tcp 10.0.0.5:6379: connect: connection refused',
        hint: "Nothing accepted connections at 10.0.0.5:6379: check that the service there is running and that the host and port in the app's environment variables are right.",
      },
    ]);
  });

  it('Python: the ConnectionRefusedError belongs to the psycopg error that names the server', () => {
    const logs = `Traceback (most recent call last):
  File "/usr/local/lib/python3.12/site-packages/psycopg2/__init__.py", line 122, in connect
    conn = _connect(dsn, connection_factory=connection_factory, **kwasync)
ConnectionRefusedError: [Errno 111] Connection refused

The above exception was the direct cause of the following exception:

psycopg2.OperationalError: connection to server at "db" (10.1.0.4), port 5432 failed: Connection refused
	Is the server running on that host and accepting TCP/IP connections?`;
    expect(analyze(logs).issues.map((i) => [i.pattern, i.count])).toEqual([['Connection refused to db:5432', 1]]);
  });

  it('Java ConnectException naming host/ip:port, and redis-py', () => {
    const logs = `java.net.ConnectException: Connection refused: localhost/127.0.0.1:8081
redis.exceptions.ConnectionError: Error 111 connecting to cache:6379. Connection refused.`;
    expect(analyze(logs).issues.map((i) => i.pattern)).toEqual(['Connection refused to localhost:8081', 'Connection refused to cache:6379']);
  });
});

describe('DNS failures', () => {
  it('names the host from Node, Go, Java, psycopg and curl', () => {
    const logs = `Error: getaddrinfo ENOTFOUND db.internal
    at GetAddrInfoReqWrap.onlookup [as oncomplete] (node:dns:107:26)
level=error msg="ping failed" err="dial tcp: lookup postgres on 127.0.0.11:53: no such host"
java.net.UnknownHostException: api.example.com
	at java.base/java.net.InetAddress.getAllByName0(InetAddress.java:1534)
psycopg2.OperationalError: could not translate host name "pg-main" to address: Name or service not known
curl: (6) Could not resolve host: files.example.org
Error: getaddrinfo EAI_AGAIN redis`;
    const { issues } = analyze(logs);
    expect(issues.map((i) => i.pattern)).toEqual([
      'DNS lookup failed for db.internal',
      'DNS lookup failed for postgres',
      'DNS lookup failed for api.example.com',
      'DNS lookup failed for pg-main',
      'DNS lookup failed for files.example.org',
      'DNS lookup failed for redis',
    ]);
    expect(issues[0]?.hint).toBe("The host name db.internal does not resolve from the app's container: check its spelling in the app's environment variables, and that the service it names exists.");
  });
});

describe('permission denied', () => {
  it('names the path, the port or the script, with a fitting hint', () => {
    const logs = `Error: EACCES: permission denied, open '/app/data/db.json'
    at Object.openSync (node:fs:581:18)
    at save (/app/src/store.js:8:6)
PermissionError: [Errno 13] Permission denied: '/var/lib/app/cache'
/bin/sh: 1: ./start.sh: Permission denied
Error: listen EACCES: permission denied 0.0.0.0:80
2024/05/01 10:00:00 open /data/uploads/tmp: permission denied`;
    expect(analyze(logs).issues.map((i) => [i.pattern, i.hint])).toEqual([
      ['Permission denied: /app/data/db.json', "The app's user may not access /app/data/db.json: make that user own it in the image (chown in the Dockerfile) or write under a directory it owns."],
      ['Permission denied: /var/lib/app/cache', "The app's user may not access /var/lib/app/cache: make that user own it in the image (chown in the Dockerfile) or write under a directory it owns."],
      ['Permission denied: ./start.sh', './start.sh cannot be run: make it executable (chmod +x in the Dockerfile, or commit it with the executable bit) and redeploy.'],
      ['Permission denied binding port 80', "Ports below 1024 need root: have the app listen on the PORT variable Slipway sets instead of 80, with the project's port above 1023."],
      ['Permission denied: /data/uploads/tmp', "The app's user may not access /data/uploads/tmp: make that user own it in the image (chown in the Dockerfile) or write under a directory it owns."],
    ]);
  });
});

describe('crash loop', () => {
  const boot = `> api@1.0.0 start
> node server.js

Server listening on port 3000
Error: Missing required environment variable JWT_SECRET
    at loadConfig (/app/config.js:5:11)
    at Object.<anonymous> (/app/server.js:3:16)

Node.js v20.11.1`;

  it('the same start line four times, each followed by a crash, names the first cause', () => {
    const { issues, summary } = analyze([boot, boot, boot, boot].join('\n'));
    expect(issues).toEqual([
      {
        pattern: 'Crash loop: the app keeps restarting',
        count: 4,
        severity: 'critical',
        example: '> api@1.0.0 start',
        hint: 'The app stops soon after each start, first with "Missing environment variable JWT_SECRET": fix that (see its own hint) and redeploy.',
      },
      {
        pattern: 'Missing environment variable JWT_SECRET',
        count: 4,
        severity: 'error',
        example: 'Error: Missing required environment variable JWT_SECRET',
        hint: "Set JWT_SECRET in the project's environment variables and redeploy.",
      },
    ]);
    expect(summary).toBe('2 issues in 36 lines: Crash loop: the app keeps restarting (4×); Missing environment variable JWT_SECRET (4×).');
  });

  it('restarts without crashes (deploys, scaling) are no crash loop', () => {
    const calm = Array.from({ length: 4 }, () => 'Server listening on port 3000\nGET / 200 3ms\nSIGTERM received, shutting down').join('\n');
    expect(analyze(calm).issues).toEqual([]);
  });

  it('gunicorn booting workers that die: the loop names the exception between start and exit', () => {
    const boot = (k: number) => `[2024-05-01 10:00:0${String(k)} +0000] [${String(7 + k)}] [INFO] Booting worker with pid: ${String(7 + k)}
[2024-05-01 10:00:0${String(k)} +0000] [${String(7 + k)}] [ERROR] Exception in worker process
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/site-packages/gunicorn/arbiter.py", line 609, in spawn_worker
    worker.init_process()
  File "/app/wsgi.py", line 2, in <module>
    from app import create_app
  File "/app/app/__init__.py", line 7, in <module>
    import redis_client
ModuleNotFoundError: No module named 'redis_client'
[2024-05-01 10:00:0${String(k)} +0000] [${String(7 + k)}] [INFO] Worker exiting (pid: ${String(7 + k)})
[2024-05-01 10:00:0${String(k)} +0000] [1] [ERROR] Worker (pid:${String(7 + k)}) exited with code 3`;
    const { issues } = analyze([boot(0), boot(1), boot(2)].join('\n'));
    expect(issues.map((i) => [i.pattern, i.count, i.severity])).toEqual([
      ['Crash loop: the app keeps restarting', 3, 'critical'],
      ['ModuleNotFoundError at /app/app/__init__.py:7 in <module>', 3, 'error'],
    ]);
    expect(issues[0]?.hint).toBe('The app stops soon after each start, first with "ModuleNotFoundError at /app/app/__init__.py:7 in <module>": fix that (see its own hint) and redeploy.');
  });

  it('two starts are not yet a loop', () => {
    expect(analyze([boot, boot].join('\n')).issues.map((i) => i.pattern)).toEqual(['Missing environment variable JWT_SECRET']);
  });
});

describe('error templates and the answer', () => {
  it('ranks the errors no signature explains by count, after the named ones, and skips info lines', () => {
    const lines = [
      ...Array.from({ length: 5 }, (_, i) => `2024-05-01T10:00:0${String(i)}Z ERROR upstream timeout after ${String(1000 + i)} ms calling inventory`),
      ...Array.from({ length: 2 }, (_, i) => JSON.stringify({ level: 60, msg: `queue ${String(i)} is unrecoverable` })),
      ...Array.from({ length: 50 }, (_, i) => `GET /api/items/${String(i)} 200`),
      'level=warn msg="cache miss ratio high"',
      'Error: connect ECONNREFUSED 10.0.0.9:5432',
    ];
    const { issues, summary } = analyze(lines);
    expect(issues.map((i) => [i.pattern, i.count, i.severity])).toEqual([
      ['queue <*> is unrecoverable', 2, 'critical'],
      ['ERROR upstream timeout after <*> ms calling inventory', 5, 'error'],
      ['Connection refused to 10.0.0.9:5432', 1, 'error'],
      ['cache miss ratio high', 1, 'warning'],
    ]);
    expect(issues[1]).toEqual({
      pattern: 'ERROR upstream timeout after <*> ms calling inventory',
      count: 5,
      severity: 'error',
      example: '2024-05-01T10:00:00Z ERROR upstream timeout after 1000 ms calling inventory',
      hint: 'Slipway has no rule for this error, logged 5 times: find where the app logs "ERROR upstream timeout after" and fix its cause.',
    });
    expect(summary).toBe('4 issues in 59 lines: queue <*> is unrecoverable (2×); ERROR upstream timeout after <*> ms calling inventory (5×); Connection refused to 10.0.0.9:5432 (1×); and 1 more.');
  });

  it('finds nothing wrong in the start-up logs of healthy Next.js, gunicorn, Spring, pino, logrus and uvicorn apps', () => {
    const healthy = `  ▲ Next.js 14.2.3
  - Local:        http://localhost:3000
 ✓ Starting...
 ✓ Ready in 1234ms
[2024-05-01 10:00:00 +0000] [1] [INFO] Starting gunicorn 21.2.0
[2024-05-01 10:00:00 +0000] [1] [INFO] Listening at: http://0.0.0.0:8000 (1)
[2024-05-01 10:00:00 +0000] [7] [INFO] Booting worker with pid: 7
[2024-05-01 10:00:00 +0000] [8] [INFO] Booting worker with pid: 8
[2024-05-01 10:00:00 +0000] [9] [INFO] Booting worker with pid: 9
2024-05-01T10:00:00.000Z  INFO 1 --- [main] com.example.App : Starting App v0.0.1 using Java 21 with PID 1
2024-05-01T10:00:02.000Z  INFO 1 --- [main] o.s.b.w.embedded.tomcat.TomcatWebServer  : Tomcat started on port 8080 (http) with context path ''
{"level":30,"time":1714557600000,"pid":1,"hostname":"web-1","msg":"Server listening at http://0.0.0.0:3000"}
10.0.0.1 - - [01/May/2024:10:00:00 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.5.0"
time="2024-05-01T10:00:00Z" level=info msg="connected to postgres" host=db port=5432
INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)
child process exited with code 0`;
    expect(analyze(healthy)).toEqual({ summary: 'No problems found in 16 lines.', issues: [], analyzer: 'builtin' });
  });

  it('says so when there is nothing to analyze or nothing wrong', () => {
    expect(analyze('')).toEqual({ summary: 'No log lines to analyze, so nothing was found.', issues: [], analyzer: 'builtin' });
    expect(analyze([])).toEqual({ summary: 'No log lines to analyze, so nothing was found.', issues: [], analyzer: 'builtin' });
    expect(analyze('GET / 200\nGET /health 200\n')).toEqual({ summary: 'No problems found in 2 lines.', issues: [], analyzer: 'builtin' });
  });

  it('keeps examples short and counts with thousands separators', () => {
    const long = `ERROR ${'x'.repeat(50_000)}`;
    const [issue] = analyze(long).issues;
    expect(issue?.example.length).toBe(1000);
    expect(formatCount(1204)).toBe('1,204');
    expect(summarize([], 1_000_000)).toBe('No problems found in 1,000,000 lines.');
  });
});
