// Everything an application needs.
#pragma once

#include <sluice/async_context.h>
#include <sluice/client.h>
#include <sluice/config.h>
#include <sluice/coro.h>
#include <sluice/drained.h>
#include <sluice/error.h>
#include <sluice/exchange.h>
#include <sluice/executor.h>
#include <sluice/handler.h>
#include <sluice/limiter.h>
#include <sluice/log.h>
#include <sluice/request.h>
#include <sluice/response.h>
#include <sluice/router.h>
#include <sluice/run_main.h>
#include <sluice/server.h>
