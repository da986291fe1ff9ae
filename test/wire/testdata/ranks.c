/*
 * ranks.c: the MPI program of the wire test. Every rank prints one line
 * saying which rank it is, how many there are, which host it runs on and
 * which MPI library it was linked with, after two allreduces that only give
 * the right answer when every rank took part: a scalar (the sum of rank+1
 * over all ranks) and a 2 MiB vector, large enough to leave the eager
 * protocol and stream over TCP between hosts.
 *
 * Output, one line per rank:
 *   torus-wire rank=R size=N host=H sum=S vector=ok|bad library=L
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VECTOR_LEN (1 << 18)

int main(int argc, char **argv)
{
	int rank, size, len, i;
	char host[256];
	char library[MPI_MAX_LIBRARY_VERSION_STRING];
	long mine, sum = 0, want;
	long *vec, *out;
	const char *vector = "ok";

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	if (gethostname(host, sizeof host) != 0) {
		perror("gethostname");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	host[sizeof host - 1] = '\0';

	/* Keep the library's first line only, without tabs, to stay on one line. */
	MPI_Get_library_version(library, &len);
	library[strcspn(library, ",\n")] = '\0';
	for (i = 0; library[i] != '\0'; i++)
		if (library[i] == '\t')
			library[i] = ' ';

	mine = rank + 1;
	MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

	vec = malloc(VECTOR_LEN * sizeof *vec);
	out = malloc(VECTOR_LEN * sizeof *out);
	if (vec == NULL || out == NULL) {
		fprintf(stderr, "rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (i = 0; i < VECTOR_LEN; i++)
		vec[i] = (long)(rank + 1) * (i % 7 + 1);
	MPI_Allreduce(vec, out, VECTOR_LEN, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	want = (long)size * (size + 1) / 2;
	for (i = 0; i < VECTOR_LEN; i++) {
		if (out[i] != want * (i % 7 + 1)) {
			vector = "bad";
			break;
		}
	}

	printf("torus-wire rank=%d size=%d host=%s sum=%ld vector=%s library=%s\n",
	       rank, size, host, sum, vector, library);
	fflush(stdout);

	free(vec);
	free(out);
	MPI_Finalize();
	return 0;
}
