/*
 * scale_routers.h - tern-scale routers: subscriptions spread through three
 * routers (bench/scale/routers.c).
 */
#ifndef TERN_SCALE_ROUTERS_H
#define TERN_SCALE_ROUTERS_H

/* argv[0] is "routers"; prints one key=value line a measurement. Ends
 * the process once measured (status 1 if a message was lost, repeated or
 * misrouted, or the routes did not converge; 2 on a bad option). */
int scale_routers(int argc, char **argv);

#endif
