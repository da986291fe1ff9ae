"""Computes pi with MPI: each rank integrates 4/(1+x^2) over its share of
the interval, an allreduce sums the shares, and rank 0 prints the result
with the hosts that computed it. The local cluster's real MPI image runs it
(make demo); it checks the allreduce against the exact value."""
import math
import socket
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
h = 1.0 / steps
part = sum(4.0 / (1.0 + ((i + 0.5) * h) ** 2) for i in range(rank, steps, size)) * h
pi = comm.allreduce(part, op=MPI.SUM)
hosts = comm.gather(socket.gethostname(), root=0)
if rank == 0:
    by_host = {}
    for r, host in enumerate(hosts):
        by_host.setdefault(host, []).append(r)
    for host, ranks in sorted(by_host.items()):
        print(f"ranks {','.join(map(str, ranks))} on {host}")
    print(f"pi is {pi:.12f} from {size} ranks (error {abs(pi - math.pi):.1e})")
    sys.exit(0 if abs(pi - math.pi) < 1e-9 else 1)
