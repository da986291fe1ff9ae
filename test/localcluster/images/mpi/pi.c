/* Computes pi with MPI, as pi.py does, for MPI implementations that
 * Debian's mpi4py is not built against (MPICH): each rank integrates
 * 4/(1+x^2) over its share of the interval, an allreduce sums the shares,
 * and rank 0 prints the result with the hosts that computed it. Exits 1
 * when the sum is not pi. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long steps = argc > 1 ? atol(argv[1]) : 10000000L;
  double h = 1.0 / (double)steps, part = 0.0, pi = 0.0;
  for (long i = rank; i < steps; i += size) {
    double x = (i + 0.5) * h;
    part += 4.0 / (1.0 + x * x);
  }
  part *= h;
  MPI_Allreduce(&part, &pi, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len;
  MPI_Get_processor_name(host, &len);
  char *hosts = rank == 0 ? calloc((size_t)size, MPI_MAX_PROCESSOR_NAME) : NULL;
  MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  int ok = 1;
  if (rank == 0) {
    /* Ranks are placed in blocks, so consecutive ranks share a host. */
    for (int r = 0; r < size;) {
      const char *hn = hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME;
      printf("ranks %d", r);
      int next = r + 1;
      while (next < size && strcmp(hosts + (size_t)next * MPI_MAX_PROCESSOR_NAME, hn) == 0) {
        printf(",%d", next++);
      }
      printf(" on %s\n", hn);
      r = next;
    }
    double err = fabs(pi - M_PI);
    printf("pi is %.12f from %d ranks (error %.1e)\n", pi, size, err);
    ok = err < 1e-9;
    free(hosts);
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
