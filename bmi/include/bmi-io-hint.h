/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The argument of BMI_set_info(addr, BMI_OPTIMISTIC_BUFFER_REG, ...), the same in both dialects'
 * bmi-types.h, which include this file once bmi_size_t is defined. Include bmi-types.h, not
 * this file. libbmi accepts the option and ignores it: its memory needs no registration hint. */
#ifndef BMI_IO_HINT_H
#define BMI_IO_HINT_H

enum BMI_io_type
{
    BMI_IO_READ = 1,
    BMI_IO_WRITE = 2
};

struct bmi_optimistic_buffer_info
{
    const void *buffer;
    bmi_size_t len;
    enum BMI_io_type rw;
};

#endif /* BMI_IO_HINT_H */
