"""Broker mode: the explorer past one machine. `mirai serve --broker redis://HOST:PORT/N` runs a
stateless API replica and `mirai worker --broker ...` a pool of sandboxed workers on any host; jobs
go through arq (an asyncio job queue on Redis), and results, job states, cancellation and permalinks
live in Redis, where every replica sees them.

Keys in the Redis database (see docs/explorer.md, Deployment):

    mirai:queue                   arq's queue (sorted set of job ids); arq's own keys sit beside it:
                                  arq:job:<id>, arq:in-progress:<id>, arq:retry:<id>, arq:result:<id>,
                                  arq:abort
    mirai:result:<versions>:<key> a cached response (JSON); <key> is the request's cache key
                                  (GenerateRequest.cache_key), <versions> the packages that made it
    mirai:results                 sorted set of cached result keys by last use (the LRU bound)
    mirai:results-of:<code hash>  set of the result keys of one code string (/free_ir_cache)
    mirai:job:<id>                hash: a POST /jobs job's state, times, worker and result
    mirai:answer:<id>             list: the worker pushes a job's answer there for the waiting replica
    mirai:workers                 hash: worker name -> its last heartbeat (JSON)
    mirai:permalink:<id>          a saved page state (JSON), kept for good (Redis with appendonly yes)

Modules: `connection` (URL, clients, keys, versions, errors), `results`, `jobs`, `permalinks` (the
shared stores), `dispatch` (the replica's side of the queue), `node` (the worker's side), `local` (a cluster on this machine, `make cluster`).
"""
