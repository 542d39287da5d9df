// fixture: an inline part reaching up in angle brackets on line 3
#pragma once
#include <runner/run/run.hpp>
