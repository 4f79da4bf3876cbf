// SPDX-License-Identifier: LGPL-2.1-or-later
// Clang's thread-safety attributes, so that what each mutex guards is a checked declaration
// rather than a comment (clang -Wthread-safety, run by scripts/test.sh). Other compilers see
// nothing.
#pragma once

#if defined(__clang__)
#define BMI_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define BMI_THREAD_ATTRIBUTE(x)
#endif

#define BMI_CAPABILITY(name) BMI_THREAD_ATTRIBUTE(capability(name))
#define BMI_SCOPED_CAPABILITY BMI_THREAD_ATTRIBUTE(scoped_lockable)
#define BMI_GUARDED_BY(mutex) BMI_THREAD_ATTRIBUTE(guarded_by(mutex))
#define BMI_PT_GUARDED_BY(mutex) BMI_THREAD_ATTRIBUTE(pt_guarded_by(mutex))
#define BMI_REQUIRES(...) BMI_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
#define BMI_EXCLUDES(...) BMI_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
#define BMI_ACQUIRE(...) BMI_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define BMI_RELEASE(...) BMI_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
#define BMI_ASSERT_CAPABILITY(x) BMI_THREAD_ATTRIBUTE(assert_capability(x))
#define BMI_TRY_ACQUIRE(...) BMI_THREAD_ATTRIBUTE(try_acquire_capability(__VA_ARGS__))
#define BMI_NO_THREAD_SAFETY_ANALYSIS BMI_THREAD_ATTRIBUTE(no_thread_safety_analysis)
